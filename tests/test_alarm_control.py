"""Named alarm control and inspection: cancel, get and pending."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from _alarm_probe import Clockwork
from _lab import Lab, open_lab
from _probe import Probe
from conftest import START_MS
from durability import (
    CancelledEvent,
    DurableAlarmInfo,
    DurableCancelledError,
    NamedAlarmState,
    NonRetryableError,
    Recurrence,
    RetryPolicy,
    SerializedError,
)

pytestmark = pytest.mark.usefixtures("host")


@asynccontextmanager
async def lab(probe: Probe) -> AsyncIterator[Lab[Probe]]:
    async with open_lab("CLOCKWORK", Clockwork, probe) as opened:
        yield opened


async def get(t: Lab[Probe], name: str) -> NamedAlarmState | None:
    await t.obj.call(name, "get")
    state: NamedAlarmState | None = t.probe.result
    return state


async def test_cancel_removes_a_pending_occurrence() -> None:
    """A cancelled one-shot never runs, get() is None, and a second cancel is False."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.call("renew", "__call__", START_MS + 60_000, payload={"n": 1})
        await t.obj.call("renew", "cancel")
        assert probe.result is True
        assert await get(t, "renew") is None
        await t.obj.call("renew", "cancel")
        assert probe.result is False
        await t.clock.advance(120_000)
        assert probe.runs == []
        [event] = [e for e in probe.events if isinstance(e, CancelledEvent)]
        assert (event.entity_kind, event.alarm, event.id, event.attempt, event.running) == (
            "named_alarm",
            "renew",
            "renew",
            0,
            False,
        )


async def test_cancel_of_nothing_scheduled_is_false() -> None:
    """Cancelling a name that never had an occurrence returns False and emits nothing."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.call("tick", "cancel")
        assert probe.result is False
        assert not [e for e in probe.events if isinstance(e, CancelledEvent)]


async def test_cancel_stops_a_recurrence_and_survives_eviction() -> None:
    """After cancel no slot of the recurrence runs again, in this instance or the next."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.call("tick", "every", 1_000, start_at=START_MS + 1_000)
        await t.clock.advance(2_000)
        await t.obj.call("tick", "cancel")
        assert probe.result is True
        await t.rt.evict(t.obj)
        await t.clock.advance(60_000)
        assert [info.occurrence for info in probe.runs] == [0, 1]
        assert await t.obj.rows() == []


async def test_cancel_aborts_a_running_attempt_whose_outcome_is_then_ignored() -> None:
    """The running handler's signal is aborted with DurableCancelledError; its success
    does not bring the recurrence back."""
    probe = Probe()
    probe.behaviour["tick"] = probe.parked("open")
    async with lab(probe) as t:
        await t.obj.call("tick", "every", 10_000)
        await t.clock.run_until_idle()
        [info] = probe.runs
        assert (await get(t, "tick")) is not None
        await t.obj.call("tick", "cancel")
        assert probe.result is True
        assert info.signal.aborted
        assert isinstance(info.signal.reason, DurableCancelledError)
        assert 'named alarm "tick" was cancelled' in str(info.signal.reason)
        assert (info.signal.reason.alarm, info.signal.reason.operation) == ("tick", None)
        probe.gate("open").set()
        await t.clock.advance(60_000)
        assert len(probe.runs) == 1
        assert await get(t, "tick") is None
        [event] = [e for e in probe.events if isinstance(e, CancelledEvent)]
        assert (event.attempt, event.running) == (1, True)


async def test_cancel_leaves_a_failed_occurrence_alone() -> None:
    """A failed occurrence is not pending: cancel returns False and get() still shows it."""
    probe = Probe(retries=RetryPolicy(max_attempts=1))

    async def fail(info: DurableAlarmInfo) -> None:
        raise RuntimeError("card declined")

    probe.behaviour["renew"] = fail
    async with lab(probe) as t:
        await t.obj.call("renew", "__call__", START_MS)
        await t.clock.run_until_idle()
        await t.obj.call("renew", "cancel")
        assert probe.result is False
        state = await get(t, "renew")
        assert state is not None and state.status == "failed"


async def test_get_reports_pending_running_and_failed_states() -> None:
    """get() shows the occurrence's times, attempt, status and last error with its stack."""
    probe = Probe(retries=RetryPolicy(max_attempts=2, delay=lambda attempt: 5_000))

    async def flaky(info: DurableAlarmInfo) -> None:
        if info.attempt == 1:
            raise RuntimeError("payments down")
        await probe.gate("second").wait()
        raise NonRetryableError("card declined")

    probe.behaviour["renew"] = flaky
    async with lab(probe) as t:
        assert await get(t, "renew") is None
        await t.obj.call("renew", "__call__", START_MS + 1_000, payload="p")
        assert await get(t, "renew") == NamedAlarmState(
            name="renew",
            scheduled_time=START_MS + 1_000,
            next_attempt_at=START_MS + 1_000,
            attempt=0,
            status="pending",
            last_error=None,
            recurrence=None,
        )
        await t.clock.advance(1_000)
        retrying = await get(t, "renew")
        assert retrying is not None
        assert (retrying.status, retrying.attempt, retrying.next_attempt_at) == (
            "pending",
            1,
            START_MS + 6_000,
        )
        assert retrying.last_error == SerializedError("RuntimeError", "payments down")
        assert retrying.last_error.stack is not None and "flaky" in retrying.last_error.stack
        await t.clock.advance(5_000)
        running = await get(t, "renew")
        assert running is not None and (running.status, running.attempt) == ("running", 2)
        probe.gate("second").set()
        await t.clock.run_until_idle()
        failed = await get(t, "renew")
        assert failed is not None and failed.status == "failed"
        assert failed.last_error == SerializedError("NonRetryableError", "card declined")


async def test_pending_lists_pending_names_by_next_attempt() -> None:
    """pending() holds every pending or running name, earliest first, and no failed one."""
    probe = Probe(retries=RetryPolicy(max_attempts=1))

    async def fail(info: DurableAlarmInfo) -> None:
        raise RuntimeError("no")

    probe.behaviour["report"] = fail
    async with lab(probe) as t:
        await t.obj.pending()
        assert probe.result == []
        await t.obj.call("report", "__call__", START_MS)
        await t.clock.run_until_idle()
        await t.obj.call("renew", "__call__", START_MS + 90_000)
        await t.obj.call("tick", "every", 30_000, start_at=START_MS + 30_000, catch_up="skip")
        await t.obj.pending()
        assert [(s.name, s.next_attempt_at) for s in probe.result] == [
            ("tick", START_MS + 30_000),
            ("renew", START_MS + 90_000),
        ]
        assert probe.result[0].recurrence == Recurrence(
            kind="every", interval_ms=30_000, catch_up="skip"
        )
        await t.clock.advance(60_000)
        await t.obj.pending()
        assert [(s.name, s.next_attempt_at) for s in probe.result] == [
            ("renew", START_MS + 90_000),
            ("tick", START_MS + 90_000),
        ]
