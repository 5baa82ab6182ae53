"""Catching up after long downtime costs the same whatever the number of missed slots,
and a recurrence whose next slot could not be stored is refused when it is scheduled.

The work is measured by counting the cron matches computed (each `CronSim` step), never
by timing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import cronsim
import pytest

from _alarm_probe import Clockwork
from _probe import Probe
from conftest import START_MS
from durability.runtime import Runtime
from durability.testing import VirtualClock

MINUTE = 60_000
DAY = 1_440 * MINUTE
FIRST_SLOT = START_MS + 40_000
"""The first `* * * * *` match at or after START_MS (2023-11-14T22:13:20Z)."""
MAX_SAFE = 2**53 - 1


class Steps:
    """Counts the cron matches computed; past `budget` each step fails, so a walk over
    every missed slot stops early instead of running for seconds."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.count = 0


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> Iterator[Steps]:
    counter = Steps(budget=100_000)
    step = cronsim.CronSim.__next__

    def counted(self: cronsim.CronSim) -> Any:
        counter.count += 1
        if counter.count > counter.budget:
            raise RuntimeError(f"more than {counter.budget} cron steps")
        return step(self)

    monkeypatch.setattr(cronsim.CronSim, "__next__", counted)
    yield counter


@asynccontextmanager
async def runtime(probe: Probe, path: Path, clock: VirtualClock) -> AsyncIterator[Runtime]:
    async with Runtime(
        bindings={"CLOCKWORK": Clockwork, "PROBE": probe}, clock=clock, path=path
    ) as rt:
        yield rt


async def _minutely_then_down(
    path: Path, clock: VirtualClock, names: list[str], policy: str, down_ms: int
) -> Probe:
    """Objects `names` on `* * * * *` run their first slot, then the runtime stops for
    `down_ms`."""
    probe = Probe()
    async with runtime(probe, path, clock) as rt:
        for name in names:
            await rt.env.CLOCKWORK.get_by_name(name).call(
                "tick", "cron", "* * * * *", catch_up=policy
            )
        await clock.advance_to(FIRST_SLOT)
    assert [info.occurrence for info in probe.runs] == [0] * len(names)
    await clock.advance(down_ms)
    return probe


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["latest", "skip"])
async def test_fifty_objects_back_after_thirty_days_compute_a_few_slots_each(
    tmp_path: Path, steps: Steps, policy: str
) -> None:
    """50 objects on `* * * * *`, down for 30 days (43,200 missed slots each): each one's
    catch-up computes a handful of matches, "latest" runs occurrence 43,200 at its slot and
    "skip" waits for 43,201."""
    clock = VirtualClock(START_MS)
    names = [f"o{number}" for number in range(50)]
    probe = await _minutely_then_down(tmp_path, clock, names, policy, 30 * DAY + 30_000)
    probe.runs.clear()
    steps.count = 0
    async with runtime(probe, tmp_path, clock):
        await clock.advance(0)
        caught_up = steps.count
        await clock.advance(MINUTE)
    assert caught_up <= 10 * len(names)
    latest = 30 * 1_440
    expected = [latest, latest + 1] if policy == "latest" else [latest + 1]
    assert sorted(info.occurrence or 0 for info in probe.runs) == sorted(expected * len(names))
    assert {info.scheduled_time for info in probe.runs} == {
        FIRST_SLOT + occurrence * MINUTE for occurrence in expected
    }


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["latest", "skip", "all"])
async def test_one_object_back_after_a_year(tmp_path: Path, steps: Steps, policy: str) -> None:
    """Down for 365 days (525,600 missed slots): "latest" runs occurrence 525,600 and
    "skip" waits for 525,601, each computing a few matches; "all" runs the latest 1,000 in
    order from 524,601, computing a few matches per occurrence."""
    clock = VirtualClock(START_MS)
    probe = await _minutely_then_down(tmp_path, clock, ["a"], policy, 365 * DAY + 30_000)
    probe.runs.clear()
    steps.count = 0
    latest = 365 * 1_440
    async with runtime(probe, tmp_path, clock):
        await clock.advance(0)
    occurrences = [info.occurrence for info in probe.runs]
    expected = {"latest": [latest], "skip": [], "all": list(range(latest - 999, latest + 1))}
    assert occurrences == expected[policy]
    assert steps.count <= 10 * max(1, len(occurrences))
    assert all(
        info.scheduled_time == FIRST_SLOT + (info.occurrence or 0) * MINUTE for info in probe.runs
    )


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"interval_ms": MAX_SAFE}, "interval_ms"),
        ({"interval_ms": MAX_SAFE - START_MS + 1}, "interval_ms"),
        ({"interval_ms": 1_000, "start_at": MAX_SAFE}, "start_at"),
        ({"interval_ms": 2 * START_MS, "start_at": MAX_SAFE - 2 * START_MS + 1}, "start_at"),
    ],
)
async def test_a_recurrence_whose_next_slot_cannot_be_stored_is_refused(
    tmp_path: Path, arguments: dict[str, int], words: str
) -> None:
    """`every` whose next slot would be past 2**53 - 1 ms raises ValueError naming the
    argument, and nothing is written (the name keeps the occurrence it had)."""
    probe = Probe()
    clock = VirtualClock(START_MS)
    async with runtime(probe, tmp_path, clock) as rt:
        stub = rt.env.CLOCKWORK.get_by_name("a")
        await stub.call("tick", "__call__", START_MS + MINUTE)
        with pytest.raises(ValueError, match=words):
            await stub.call("tick", "every", **arguments)
        await stub.call("tick", "get")
        assert (probe.result.scheduled_time, probe.result.recurrence) == (START_MS + MINUTE, None)
        await clock.advance(MINUTE)
    assert [info.occurrence for info in probe.runs] == [None]
