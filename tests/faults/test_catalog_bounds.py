"""The alarm catalog's file stays a superset of the armed alarms while an object arms and
deletes its alarm again and again: re-arming needs a catalog write before the object's
commit only when the file holds no bound that early."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from durability.runtime._catalog import Catalog

KEY = ("NS", "a" * 64)


def stored(file: Path) -> int | None:
    """The bound the catalog file holds for KEY, read by another connection."""
    with sqlite3.connect(file) as reader:
        row = reader.execute("SELECT wake_ms FROM alarms WHERE id = ?", (KEY[1],)).fetchone()
    return None if row is None else int(row[0])


async def test_rearming_after_a_deletion_not_yet_written_needs_no_catalog_write(
    tmp_path: Path,
) -> None:
    """An alarm deleted (its removal not written yet) and armed again at a time no earlier
    than the bound the file holds commits without a catalog write; an earlier time, or
    once the removal is written, needs one first; the file never loses the bound while an
    alarm may be armed."""
    file = tmp_path / "_catalog.sqlite3"
    catalog = Catalog(file)
    catalog.open(asyncio.get_running_loop())
    try:
        flush = catalog.lower(KEY, "a", 1_000)
        assert flush is not None
        flush()
        catalog.settle(KEY, "a", 1_000)
        assert stored(file) == 1_000
        catalog.settle(KEY, "a", None)  # deleted: the removal waits for a later write
        assert catalog.lower(KEY, "a", 1_500) is None
        assert stored(file) == 1_000
        assert catalog.lower(KEY, "a", 900) is not None  # earlier than the file's bound
        catalog.flush()
        assert stored(file) == 900
        catalog.settle(KEY, "a", None)
        catalog.flush()
        assert stored(file) is None
        assert catalog.lower(KEY, "a", 2_000) is not None  # the file has no bound now
    finally:
        catalog.close()
