"""Reading armed alarms straight from object files, to rebuild the alarm catalog.

The objects' own alarm rows are authoritative; the catalog only saves opening every
object at start. When the catalog is missing, corrupt, or may be older than the
objects (they changed after its last clean close), the alarms are read back from the
object files themselves: all of them, or only those modified since that close.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger("durability.runtime")

_OBJECT_FILE = re.compile(r"[0-9a-f]{64}\.sqlite3")

Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class StoredAlarm:
    """What one object file says about its alarm: when to wake it (`None`: never)."""

    key: Key
    name: str | None
    wake_ms: int | None


def object_files(root: Path, modified_since_ns: int | None) -> Iterator[tuple[Key, Path]]:
    """Every object file under `root` (only those modified since the time, if given).

    A file counts as modified when it or its write-ahead log is; only directory
    entries are read for the others, no database is opened.
    """
    if not root.is_dir():
        return
    for namespace in sorted(root.iterdir()):
        if not namespace.is_dir() or not namespace.name.isidentifier():
            continue
        for file in sorted(namespace.iterdir()):
            if not _OBJECT_FILE.fullmatch(file.name):
                continue
            try:
                modified = modified_since_ns is None or _modified_ns(file) >= modified_since_ns
            except FileNotFoundError:
                continue
            if modified:
                yield (namespace.name, file.name[:64]), file


def read_alarm_file(key: Key, file: Path) -> StoredAlarm | None:
    """The alarm stored in one object file; `None` (and a warning) if it cannot be read."""
    try:
        connection = sqlite3.connect(file, isolation_level=None)
    except sqlite3.Error as error:
        logger.warning("object %s:%s (%s) cannot be read: %r", *key, file, error)
        return None
    try:
        tables = {
            name
            for (name,) in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
                " AND name IN ('_durability_alarm', '_durability_name')"
            )
        }
        wake_ms = None
        if "_durability_alarm" in tables:
            for scheduled_ms, retry_ms in connection.execute(
                "SELECT scheduled_ms, retry_ms FROM _durability_alarm WHERE id = 1"
            ):
                times = [t for t in (scheduled_ms, retry_ms) if t is not None]
                wake_ms = min(times) if times else None
        name = None
        if "_durability_name" in tables:
            for (stored,) in connection.execute("SELECT name FROM _durability_name WHERE id = 1"):
                name = stored
        return StoredAlarm(key, name, wake_ms)
    except sqlite3.Error as error:
        logger.warning("object %s:%s (%s) cannot be read: %r", *key, file, error)
        return None
    finally:
        connection.close()


def _modified_ns(file: Path) -> int:
    times = [file.stat().st_mtime_ns]
    with contextlib.suppress(FileNotFoundError):
        times.append(file.with_name(file.name + "-wal").stat().st_mtime_ns)
    return max(times)
