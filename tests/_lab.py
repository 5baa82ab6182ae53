"""A shared harness for engine tests: one object on a runtime driven by a virtual clock."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Generic, TypeVar

from _hosts import hosted
from conftest import START_MS
from durability.runtime import DurableObject, ObjectStub, Runtime
from durability.testing import VirtualClock

P = TypeVar("P")


@dataclasses.dataclass
class Lab(Generic[P]):
    clock: VirtualClock
    rt: Runtime
    obj: ObjectStub
    probe: P


@asynccontextmanager
async def open_lab(
    binding: str, cls: type[DurableObject], probe: P, path: Path | None = None
) -> AsyncIterator[Lab[P]]:
    """Object "a" of `cls` bound as `binding`, with `probe` bound as PROBE, at START_MS, on
    the test's host."""
    clock = VirtualClock(START_MS)
    bindings = {binding: cls, "PROBE": probe}
    async with Runtime(bindings=bindings, clock=clock, path=path, **hosted()) as rt:
        yield Lab(clock, rt, rt.env[binding].get_by_name("a"), probe)


def note_attempt_on_disk(probe: dict[str, Any], call_id: str) -> None:
    """Record in `probe["on_disk"]` the attempt another connection reads for `call_id`
    in the file `probe["file"]` (if set): what is durable while the handler runs."""
    seen = probe.get("file")
    if seen is None:
        return
    with sqlite3.connect(seen) as reader:
        row = reader.execute(
            "SELECT attempt FROM durability_calls WHERE id = ?", (call_id,)
        ).fetchone()
    probe.setdefault("on_disk", {})[call_id] = row[0]
