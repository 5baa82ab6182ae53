"""What every test shares: the one start time, a virtual clock, and a live object's ctx."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

import durability
from durability.runtime import AlarmInvocationInfo, DurableObject, ObjectStub, Runtime
from durability.testing import VirtualClock

START_MS = 1_700_000_000_000
"""Where every test's virtual clock starts (the VirtualClock default)."""

DURABILITY_TABLES = "SELECT name FROM sqlite_master WHERE name LIKE 'durability%' ORDER BY name"


@pytest.fixture
def clock() -> VirtualClock:
    """A fresh virtual clock at START_MS."""
    return VirtualClock(START_MS)


def noop(_: Any) -> None:
    """A handler that does nothing."""


class Holder(DurableObject):
    """An object that hands its `ctx` to the test, so helpers can be built on it directly."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.probe: SimpleNamespace = env["PROBE"]
        self.probe.ctx = ctx

    def now(self) -> int:
        """`durability.now_ms()` as seen inside the object."""
        return durability.now_ms()

    def echo(self, value: Any) -> Any:
        """The argument, copied both ways as JSON."""
        return value

    async def fail(self) -> None:
        """Raise an exception the caller must see with its class and message."""
        raise KeyError("missing")

    async def _hidden(self) -> None:
        """Private: stubs must refuse it."""

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        """Record the delivery: when it ran and with what platform info."""
        self.probe.alarms.append((durability.now_ms(), info))


@dataclass
class LiveObject:
    """A running runtime, its clock, and one live `Holder` whose ctx the test uses."""

    runtime: Runtime
    clock: VirtualClock
    probe: SimpleNamespace
    stub: ObjectStub

    @property
    def ctx(self) -> Any:
        return self.probe.ctx

    def tables(self) -> list[str]:
        return [row["name"] for row in self.ctx.storage.sql.exec(DURABILITY_TABLES)]


@pytest.fixture
async def live(clock: VirtualClock) -> AsyncIterator[LiveObject]:
    """An in-memory runtime on a virtual clock with one live object."""
    probe = SimpleNamespace(ctx=None, alarms=[])
    async with Runtime(bindings={"OBJ": Holder, "PROBE": probe}, clock=clock) as runtime:
        stub = runtime.env.OBJ.get_by_name("live")
        await stub.now()
        yield LiveObject(runtime, clock, probe, stub)
