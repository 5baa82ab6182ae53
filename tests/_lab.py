"""A shared harness for engine tests: one object on a runtime driven by a virtual clock."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Generic, TypeVar

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
    """Object "a" of `cls` bound as `binding`, with `probe` bound as PROBE, at START_MS."""
    clock = VirtualClock(START_MS)
    async with Runtime(bindings={binding: cls, "PROBE": probe}, clock=clock, path=path) as rt:
        yield Lab(clock, rt, rt.env[binding].get_by_name("a"), probe)
