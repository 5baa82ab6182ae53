"""Handlers that return without awaiting run back to back on permits handed on, in
slices bounded by a count and by the runtime's clock; their successes are written
together, after the slice."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from conftest import START_MS
from durability import Durability, DurableCall
from durability._engine.records import RUN_ROWS, RUN_SLICE_MS
from durability.runtime import DurableObject, Runtime
from durability.testing import VirtualClock

CALLS = 300


class SteppedClock:
    """A clock that moves only when told: each handler takes `step_ms`."""

    def __init__(self, step_ms: int) -> None:
        self.ms = START_MS
        self.step_ms = step_ms

    def now_ms(self) -> int:
        return self.ms


class Slices(DurableObject):
    """Sync handlers that note how many calls were completed when each one ran."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.probe: dict[str, Any] = env["PROBE"]
        self.durability = Durability(context=ctx, handlers={"work": self._work})

    def _work(self, call: DurableCall[Any]) -> None:
        clock = self.probe.get("clock")
        if clock is not None:
            clock.ms += clock.step_ms
        rows = self.ctx.storage.sql.exec(
            "SELECT COUNT(*) AS n FROM durability_calls WHERE status = 'completed'"
        )
        self.probe.setdefault("seen", []).append(rows.one()["n"])

    async def register_many(self, count: int) -> None:
        """Register `count` calls due now, in one turn."""
        await asyncio.gather(*(self.durability.work(f"c-{n}") for n in range(count)))

    async def completed(self) -> int:
        rows = self.ctx.storage.sql.exec(
            "SELECT COUNT(*) AS n FROM durability_calls WHERE status = 'completed'"
        )
        return int(rows.one()["n"])


def _slices(seen: list[int]) -> list[int]:
    """The sizes of the runs of handlers that saw the same completed count: the handlers
    whose successes were written together."""
    return [len(list(run)) for _, run in itertools.groupby(seen)]


async def _run(clock: Any) -> tuple[list[int], int]:
    probe: dict[str, Any] = {} if isinstance(clock, VirtualClock) else {"clock": clock}
    async with Runtime(bindings={"S": Slices, "PROBE": probe}, clock=clock) as rt:
        stub = rt.env.S.get_by_name("slices")
        await stub.register_many(CALLS)
        for _ in range(1_000):
            if await stub.completed() == CALLS:
                break
            await asyncio.sleep(0)
        return _slices(probe["seen"]), await stub.completed()


async def test_fast_handlers_run_in_slices_of_up_to_run_rows() -> None:
    """300 calls due at once with the default 10 permits: the queue runs them back to
    back, the 10 claimed with the free permits first (handing those permits on), at most
    `RUN_ROWS` (128) per slice, each slice's successes written together."""
    slices, completed = await _run(VirtualClock(START_MS))
    assert completed == CALLS
    assert slices == [RUN_ROWS, RUN_ROWS, CALLS - 2 * RUN_ROWS]


async def test_slow_handlers_end_a_slice_once_its_time_is_up() -> None:
    """Handlers that each take 1 ms by the runtime's clock: a slice stops handing permits
    on once `RUN_SLICE_MS` have passed (the clock is read once per round of handed-on
    permits), so its successes are not held back behind 128 slow handlers."""
    clock = SteppedClock(step_ms=1)
    slices, completed = await _run(clock)
    assert completed == CALLS
    assert sum(slices) == CALLS
    assert max(slices) <= 10 + RUN_SLICE_MS + 8
    assert len(slices) > CALLS // RUN_ROWS + 2
