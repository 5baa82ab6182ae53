"""A shared harness for engine tests: one object on a runtime driven by a virtual clock."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Generic, TypeVar

from durability.runtime import DurableObject, ObjectStub, Runtime
from durability.testing import VirtualClock

T0 = 1_700_000_000_000

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
    """Object "a" of `cls` bound as `binding`, with `probe` bound as PROBE, at T0."""
    clock = VirtualClock(T0)
    async with Runtime(bindings={binding: cls, "PROBE": probe}, clock=clock, path=path) as rt:
        yield Lab(clock, rt, rt.env[binding].get_by_name("a"), probe)
