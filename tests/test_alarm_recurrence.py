"""Recurring named alarms: every, cron, catch-up, failures, replacement and validation."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from _alarm_probe import Clockwork
from _hosts import hosted
from _lab import Lab, open_lab
from _probe import Probe
from conftest import START_MS
from durability import (
    AttemptSettledEvent,
    DurableAlarmInfo,
    NamedAlarmState,
    Recurrence,
    RetryPolicy,
    ScheduledEvent,
)
from durability.runtime import Runtime
from durability.testing import VirtualClock

pytestmark = pytest.mark.usefixtures("host")

PARIS = ZoneInfo("Europe/Paris")
HOUR = 3_600_000


@asynccontextmanager
async def lab(probe: Probe, path: Path | None = None) -> AsyncIterator[Lab[Probe]]:
    async with open_lab("CLOCKWORK", Clockwork, probe, path) as opened:
        yield opened


async def get(t: Lab[Probe], name: str) -> NamedAlarmState:
    await t.obj.call(name, "get")
    state: NamedAlarmState = t.probe.result
    return state


def ms(text: str) -> int:
    return round(datetime.fromisoformat(text).timestamp() * 1000)


async def test_every_runs_each_slot_once_at_its_time_with_a_key_per_slot() -> None:
    """Slots are start + k * interval, never early; occurrence counts them; the payload
    reaches each; the idempotency key is new per slot."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.call("tick", "every", 1_000, start_at=START_MS + 500, payload={"p": 1})
        await t.clock.advance(499)
        assert probe.runs == []
        await t.clock.advance(3_001)
        assert probe.started_at == [START_MS + 500 + k * 1_000 for k in range(4)]
        assert [info.scheduled_time for info in probe.runs] == probe.started_at
        assert [info.occurrence for info in probe.runs] == [0, 1, 2, 3]
        assert {str(info.payload) for info in probe.runs} == {"{'p': 1}"}
        assert len({info.idempotency_key for info in probe.runs}) == 4
        state = await get(t, "tick")
        assert (state.scheduled_time, state.status, state.attempt) == (
            START_MS + 4_500,
            "pending",
            0,
        )
        assert state.recurrence == Recurrence(kind="every", interval_ms=1_000)
        slots = [e for e in probe.events if isinstance(e, ScheduledEvent)]
        assert [e.occurrence for e in slots] == [0, 1, 2, 3, 4]
        assert [e.scheduled_time for e in slots] == [START_MS + 500 + k * 1_000 for k in range(5)]


async def test_every_without_start_at_runs_its_first_slot_now() -> None:
    """every(interval) starts at once, then every interval after that first slot."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.call("tick", "every", 60_000)
        await t.clock.advance(120_000)
        assert probe.started_at == [START_MS, START_MS + 60_000, START_MS + 120_000]


async def test_next_slot_follows_the_previous_slot_not_the_retry() -> None:
    """A slot that succeeds late (after a retry) does not shift the next slot; its
    retries keep the slot's key and the next slot gets a new one."""
    probe = Probe(retries=RetryPolicy(delay=lambda attempt: 3_000))

    async def fail_first(info: DurableAlarmInfo) -> None:
        if info.attempt == 1 and info.occurrence == 0:
            raise RuntimeError("later")

    probe.behaviour["tick"] = fail_first
    async with lab(probe) as t:
        await t.obj.call("tick", "every", 10_000)
        await t.clock.advance(20_000)
        assert [(i.occurrence, i.attempt) for i in probe.runs] == [(0, 1), (0, 2), (1, 1), (2, 1)]
        assert probe.started_at == [
            START_MS,
            START_MS + 3_000,
            START_MS + 10_000,
            START_MS + 20_000,
        ]
        keys = [info.idempotency_key for info in probe.runs]
        assert keys[0] == keys[1] and len(set(keys)) == 3


async def test_an_exhausted_slot_is_recorded_and_the_recurrence_moves_on() -> None:
    """A slot that fails for good emits its failure, shows as last_error while the next
    slot waits, and the next slot runs on time (and clears the error by succeeding)."""
    probe = Probe(retries=RetryPolicy(max_attempts=2, delay=lambda attempt: 1_000))

    async def fail_slot_zero(info: DurableAlarmInfo) -> None:
        if info.occurrence == 0:
            raise RuntimeError(f"slot 0 attempt {info.attempt}")

    probe.behaviour["tick"] = fail_slot_zero
    async with lab(probe) as t:
        await t.obj.call("tick", "every", 10_000)
        await t.clock.advance(1_000)
        waiting = await get(t, "tick")
        assert (waiting.status, waiting.scheduled_time, waiting.attempt) == (
            "pending",
            START_MS + 10_000,
            0,
        )
        assert waiting.last_error is not None
        assert waiting.last_error.message == "slot 0 attempt 2"
        failed = [
            e for e in probe.events if isinstance(e, AttemptSettledEvent) and e.outcome == "failed"
        ]
        assert [e.attempt for e in failed] == [2]
        await t.clock.advance(9_000)
        assert [(i.occurrence, i.attempt) for i in probe.runs] == [(0, 1), (0, 2), (1, 1)]
        assert (await get(t, "tick")).last_error is None


async def test_scheduling_again_replaces_the_recurrence() -> None:
    """A one-shot, every or cron call on the name replaces the recurrence it had."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.call("tick", "every", 1_000, start_at=START_MS + 1_000)
        await t.obj.call("tick", "every", 5_000, start_at=START_MS + 5_000)
        await t.clock.advance(10_000)
        assert probe.started_at == [START_MS + 5_000, START_MS + 10_000]
        await t.obj.call("tick", "__call__", START_MS + 12_000)
        await t.clock.advance(20_000)
        assert probe.started_at[2:] == [START_MS + 12_000]
        assert probe.runs[-1].occurrence is None
        assert await t.obj.rows() == []


async def test_a_recurrence_survives_eviction_and_crash() -> None:
    """Evicted or crashed between slots, the recurrence runs every slot once, on time."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.call("tick", "every", HOUR, start_at=START_MS + HOUR)
        for step in range(6):
            await (t.rt.crash if step % 2 else t.rt.evict)(t.obj)
            await t.clock.advance(HOUR)
        assert probe.started_at == [START_MS + k * HOUR for k in range(1, 7)]
        assert [info.occurrence for info in probe.runs] == list(range(6))


async def test_cron_runs_at_the_matches_of_its_expression() -> None:
    """cron(expression) runs at each match, from the first at or after now, in UTC."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.call("report", "cron", "*/15 * * * *", payload="q")
        await t.clock.advance(HOUR)
        first = (START_MS // 900_000 + 1) * 900_000
        assert probe.started_at == [first + k * 900_000 for k in range(4)]
        assert [info.occurrence for info in probe.runs] == [0, 1, 2, 3]
        assert [info.payload for info in probe.runs] == ["q"] * 4
        state = await get(t, "report")
        assert state.recurrence == Recurrence(
            kind="cron", expression="*/15 * * * *", tz="UTC", catch_up="latest"
        )


async def test_cron_in_a_time_zone_follows_its_wall_clock() -> None:
    """A 09:00 Europe/Paris cron runs at 08:00 UTC in winter and at 07:00 UTC from the
    day summer time starts (2026-03-29)."""
    probe = Probe()
    async with lab(probe) as t:
        await t.clock.advance_to(ms("2026-03-27T12:00:00+00:00"))
        await t.obj.call("report", "cron", "0 9 * * *", tz="Europe/Paris")
        await t.clock.advance_to(ms("2026-03-30T12:00:00+00:00"))
        assert probe.started_at == [
            ms("2026-03-28T08:00:00+00:00"),
            ms("2026-03-29T07:00:00+00:00"),
            ms("2026-03-30T07:00:00+00:00"),
        ]


@asynccontextmanager
async def reopened(probe: Probe, path: Path, clock: VirtualClock) -> AsyncIterator[Lab[Probe]]:
    bindings = {"CLOCKWORK": Clockwork, "PROBE": probe}
    async with Runtime(bindings=bindings, clock=clock, path=path, **hosted()) as rt:
        yield Lab(clock, rt, rt.env["CLOCKWORK"].get_by_name("a"), probe)


@pytest.mark.parametrize(
    ("policy", "occurrences"),
    [("latest", [0, 1, 7, 8]), ("skip", [0, 1, 8]), ("all", [0, 1, 2, 3, 4, 5, 6, 7, 8])],
)
async def test_catch_up_across_a_stopped_runtime(
    tmp_path: Path, policy: str, occurrences: list[int]
) -> None:
    """Down across slots 2..7: "latest" runs slot 7 once, "skip" waits for slot 8, "all"
    runs each missed slot in order; none early, and the next slot is on time."""
    probe = Probe()
    clock = VirtualClock(START_MS)
    async with reopened(probe, tmp_path, clock) as t:
        await t.obj.call("tick", "every", HOUR, start_at=START_MS, catch_up=policy)
        await clock.advance(HOUR)
    await clock.advance(6 * HOUR + 1_000)
    async with reopened(probe, tmp_path, clock) as t:
        await clock.advance(HOUR)
    assert [info.occurrence for info in probe.runs] == occurrences
    assert all(
        at >= info.scheduled_time for at, info in zip(probe.started_at, probe.runs, strict=True)
    )
    assert [info.scheduled_time for info in probe.runs] == [
        START_MS + k * HOUR for k in occurrences
    ]
    assert probe.started_at[-1] == START_MS + 8 * HOUR


async def test_catch_up_at_scheduling_applies_to_a_start_in_the_past() -> None:
    """every(start_at=<past>) treats the elapsed slots as missed, per the policy."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.call("tick", "every", 1_000, start_at=START_MS - 5_500)
        await t.obj.call("report", "every", 1_000, start_at=START_MS - 5_500, catch_up="skip")
        await t.clock.run_until_idle()
        assert [(i.name, i.occurrence, i.scheduled_time) for i in probe.runs] == [
            ("tick", 5, START_MS - 500)
        ]
        assert (await get(t, "report")).scheduled_time == START_MS + 500


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (("every", 0), ValueError, "interval_ms"),
        (("every", 1.5), TypeError, "interval_ms"),
        (("every", 1_000, {"catch_up": "sometimes"}), ValueError, "catch_up"),
        (("every", 1_000, {"start_at": "soon"}), TypeError, "start_at"),
        (("cron", "0 9 * *"), ValueError, "five fields"),
        (("cron", "0 0 9 * * *"), ValueError, "five fields"),
        (("cron", "61 * * * *"), ValueError, "expression"),
        (("cron", "0 9 * * *", {"tz": "Mars/Olympus"}), ValueError, "tz"),
        (("cron", 5), TypeError, "expression"),
        (("cron", "0 9 * * *", {"catch_up": "none"}), ValueError, "catch_up"),
    ],
)
async def test_bad_recurrences_raise_and_store_nothing(
    call: tuple[Any, ...], error: type[Exception], words: str
) -> None:
    """A bad argument raises, naming it, and the name keeps the occurrence it had."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.call("tick", "__call__", START_MS + 60_000)
        method, argument, *rest = call
        kwargs = rest[0] if rest else {}
        with pytest.raises(error, match=words):
            await t.obj.call("tick", method, argument, **kwargs)
        state = await get(t, "tick")
        assert (state.scheduled_time, state.recurrence) == (START_MS + 60_000, None)


async def test_cron_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without cronsim installed, cron raises ImportError naming durability-objects[cron]."""
    monkeypatch.setitem(sys.modules, "cronsim", None)
    probe = Probe()
    async with lab(probe) as t:
        with pytest.raises(ImportError, match=r"pip install 'durability-objects\[cron\]'"):
            await t.obj.call("report", "cron", "0 9 * * *")
        await t.obj.call("report", "get")
        assert probe.result is None
