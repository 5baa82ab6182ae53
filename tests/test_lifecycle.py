"""Lifecycle events, the hook emitter and structured failure reports."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable
from typing import Any

import pytest

from conftest import START_MS, LiveObject, noop
from durability import (
    AttemptSettledEvent,
    AttemptStartedEvent,
    Durability,
    DurabilityAlarms,
    DurabilityFanout,
    DurabilityScheduler,
    FanoutTarget,
    LifecycleEventType,
    PurgedEvent,
    RegisteredEvent,
    ScheduledEvent,
    SerializedError,
    TerminalEvent,
)
from durability._engine.lifecycle import create_emitter, report_failure

EVENT = RegisteredEvent(operation="charge", id="inv-1", generation="g1", timestamp=5)


def _records(caplog: pytest.LogCaptureFixture, event: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == event]


def test_events_carry_fixed_type_and_kind() -> None:
    """Each event class fixes its `type` (and `entity_kind` where only one applies)."""
    assert (EVENT.type, EVENT.entity_kind, EVENT.attempt) == ("registered", "operation", 0)
    scheduled = ScheduledEvent(
        alarm="renew", id="renew", generation="g", timestamp=1, scheduled_time=9
    )
    assert (scheduled.type, scheduled.entity_kind) == ("scheduled", "named_alarm")
    started = AttemptStartedEvent(
        entity_kind="named_alarm", alarm="renew", id="renew", generation="g", timestamp=1, attempt=2
    )
    assert (started.type, started.operation) == ("attempt_started", None)
    settled = AttemptSettledEvent(
        entity_kind="operation",
        operation="charge",
        id="a",
        generation="g",
        timestamp=1,
        attempt=1,
        outcome="retry_scheduled",
        duration_ms=0,
        error=SerializedError("Error", "x"),
        next_attempt_at=2,
    )
    assert settled.type == "attempt_settled"
    terminal = TerminalEvent(
        entity_kind="operation",
        operation="charge",
        id="a",
        generation="g",
        timestamp=1,
        attempt=5,
        error=SerializedError("E", "m"),
    )
    assert (terminal.type, terminal.reason) == ("terminal", "attempts_exhausted")
    purged = PurgedEvent(entity_kind="named_alarm", timestamp=1, before=2, count=3)
    assert purged.type == "purged"
    with pytest.raises(dataclasses.FrozenInstanceError):
        EVENT.id = "other"  # type: ignore[misc]


def test_event_type_constants_name_every_event_type() -> None:
    """LifecycleEventType has one string constant per event type, equal to the events' `type`."""
    assert [member.value for member in LifecycleEventType] == [
        "registered",
        "scheduled",
        "attempt_started",
        "attempt_settled",
        "terminal",
        "cancelled",
        "retried",
        "purged",
    ]
    assert EVENT.type == LifecycleEventType.REGISTERED  # type: ignore[comparison-overlap]
    assert type(EVENT.type) is str


def test_emitter_without_hook_is_a_no_op() -> None:
    """No hook: emitting does nothing and hands nothing to wait_until."""
    handed: list[Awaitable[Any]] = []
    create_emitter(None, handed.append)(EVENT)
    assert handed == []


def test_sync_hook_receives_the_event() -> None:
    """A plain function hook is called synchronously with the event."""
    seen: list[Any] = []
    create_emitter(seen.append, lambda awaitable: None)(EVENT)
    assert seen == [EVENT]


def test_raising_hook_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    """A hook that raises is reported as durability.lifecycle_hook.failed with the entity."""

    def hook(event: Any) -> None:
        raise RuntimeError("hook broke")

    with caplog.at_level(logging.ERROR, logger="durability"):
        create_emitter(hook, lambda awaitable: None)(EVENT)
    [record] = _records(caplog, "durability.lifecycle_hook.failed")
    assert record.details == {  # type: ignore[attr-defined]
        "entity_kind": "operation",
        "lifecycle_type": "registered",
        "entity_id": "inv-1",
    }
    assert record.error == {"name": "RuntimeError", "message": "hook broke"}  # type: ignore[attr-defined]


async def test_async_hook_failure_is_logged_in_background(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An async hook runs via wait_until; its failure is reported, never raised."""
    handed: list[Awaitable[Any]] = []

    async def hook(event: Any) -> None:
        await asyncio.sleep(0)
        raise ValueError("late")

    with caplog.at_level(logging.ERROR, logger="durability"):
        create_emitter(hook, handed.append)(EVENT)
        assert len(handed) == 1
        await handed[0]
    [record] = _records(caplog, "durability.lifecycle_hook.failed")
    assert record.error == {"name": "ValueError", "message": "late"}  # type: ignore[attr-defined]


def test_purged_event_without_id_reports_durability(caplog: pytest.LogCaptureFixture) -> None:
    """A failing hook on an id-less event names the entity "durability"."""

    def hook(event: Any) -> None:
        raise RuntimeError("x")

    with caplog.at_level(logging.ERROR, logger="durability"):
        create_emitter(hook, lambda awaitable: None)(
            PurgedEvent(entity_kind="operation", timestamp=1, before=1, count=0)
        )
    [record] = _records(caplog, "durability.lifecycle_hook.failed")
    assert record.details["entity_id"] == "durability"  # type: ignore[attr-defined]


def test_report_failure_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    """report_failure logs one structured record even for a value whose str() raises."""

    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    with caplog.at_level(logging.ERROR, logger="durability"):
        report_failure("durability.alarm.failed", {"retry_in_ms": 1000}, Unprintable())
        report_failure("durability.alarm.failed", {"retry_in_ms": 1000}, None)
    records = _records(caplog, "durability.alarm.failed")
    assert [r.error for r in records] == [  # type: ignore[attr-defined]
        {"name": "Unprintable", "message": "Unknown thrown value"},
        {"name": "Error", "message": "null"},
    ]
    assert all(r.details == {"retry_in_ms": 1000} for r in records)  # type: ignore[attr-defined]


async def test_lifecycle_events_are_frozen_dataclasses(live: LiveObject) -> None:
    """Hooks get frozen events with `type` and `entity_kind`; a raising hook changes nothing."""
    events: list[Any] = []

    def hook(event: Any) -> None:
        events.append(event)
        raise RuntimeError("hook broke")

    scheduler = DurabilityScheduler(context=live.ctx)
    operations = Durability(scheduler=scheduler, handlers={"charge": noop}, on_lifecycle_event=hook)
    alarms = DurabilityAlarms(
        scheduler=scheduler, handlers={"renew": noop}, on_lifecycle_event=hook
    )
    await operations.charge(id="a", payload=None)
    await alarms.renew(START_MS)
    await live.clock.run_until_idle()
    await operations.purge_before(START_MS + 1)
    assert (await operations.charge.get_result("a")).status == "not_found"
    kinds = {(type(e), e.type, e.entity_kind) for e in events}
    assert {
        (RegisteredEvent, "registered", "operation"),
        (AttemptStartedEvent, "attempt_started", "operation"),
        (AttemptSettledEvent, "attempt_settled", "operation"),
        (ScheduledEvent, "scheduled", "named_alarm"),
        (PurgedEvent, "purged", "operation"),
    } <= kinds
    for event in events:
        assert type(event).__dataclass_params__.frozen
    assert TerminalEvent.__dataclass_params__.frozen  # type: ignore[attr-defined]


async def test_a_hook_gets_only_the_event_types_it_names(
    live: LiveObject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `lifecycle_events`, events of other types are never even built."""

    def never_built(**fields: Any) -> None:
        raise AssertionError(f"an event nobody listens to was built: {fields}")

    from durability._engine import records
    from durability._operations import durability as _operations

    monkeypatch.setattr(_operations, "RegisteredEvent", never_built)
    monkeypatch.setattr(records, "AttemptStartedEvent", never_built)
    settled: list[Any] = []
    started: list[Any] = []
    scheduler = DurabilityScheduler(context=live.ctx)
    operations = Durability(
        scheduler=scheduler,
        handlers={"charge": noop},
        on_lifecycle_event=settled.append,
        lifecycle_events=[LifecycleEventType.ATTEMPT_SETTLED],
    )
    alarms = DurabilityAlarms(
        scheduler=scheduler,
        handlers={"renew": noop},
        on_lifecycle_event=started.append,
        lifecycle_events={"attempt_settled", "purged"},
    )
    await operations.charge(id="a", payload=None)
    await alarms.renew(START_MS)
    await live.clock.run_until_idle()
    await alarms.purge_before(START_MS + 1)
    assert [(e.type, e.id, e.outcome) for e in settled] == [("attempt_settled", "a", "completed")]
    assert [(e.type, e.entity_kind) for e in started] == [
        ("attempt_settled", "named_alarm"),
        ("purged", "named_alarm"),
    ]


def test_fanout_lifecycle_events_are_checked_as_the_helpers_are(live: LiveObject) -> None:
    """A fanout's `lifecycle_events` follow the same rules, against the four types a
    fanout emits."""
    targets = {"a": FanoutTarget(deliver=noop)}
    with pytest.raises(TypeError, match=r"lifecycle_events.*got str"):
        DurabilityFanout(
            context=live.ctx,
            targets=targets,
            on_lifecycle_event=print,
            lifecycle_events="terminal",
        )
    with pytest.raises(ValueError, match="'purged' is not an event type") as caught:
        DurabilityFanout(
            context=live.ctx,
            targets=targets,
            on_lifecycle_event=print,
            lifecycle_events=["terminal", "purged"],
        )
    assert str(caught.value).endswith(
        "choose from attempt_settled, attempt_started, registered, terminal"
    )
    with pytest.raises(ValueError, match="lifecycle_events needs on_lifecycle_event"):
        DurabilityFanout(context=live.ctx, targets=targets, lifecycle_events=["terminal"])


async def test_lifecycle_events_must_name_types_the_helper_emits(live: LiveObject) -> None:
    """Bad `lifecycle_events` fail at construction with the option's name and the rule:
    a string, bytes, a non-iterable or a non-string item is a TypeError; a type the
    helper never emits (or a misspelt one) is a ValueError listing the valid ones; the
    option without a hook is a ValueError."""
    for bad, kind in (("attempt_settled", "str"), (b"ab", "bytes"), (3, "int"), ([["a"]], "list")):
        with pytest.raises(TypeError, match=f"lifecycle_events.*got {kind}"):
            Durability(
                context=live.ctx,
                handlers={"c": noop},
                on_lifecycle_event=print,
                lifecycle_events=bad,  # type: ignore[arg-type]
            )
    with pytest.raises(ValueError, match="'settled', 'started' is not an event type") as caught:
        DurabilityAlarms(
            context=live.ctx,
            handlers={"r": noop},
            on_lifecycle_event=print,
            lifecycle_events=["started", "settled", "purged"],
        )
    assert "choose from attempt_settled, attempt_started, cancelled, purged, scheduled, " in str(
        caught.value
    )
    with pytest.raises(ValueError, match="'scheduled' is not an event type this helper emits"):
        Durability(
            context=live.ctx,
            handlers={"c": noop},
            on_lifecycle_event=print,
            lifecycle_events=["scheduled"],
        )
    with pytest.raises(ValueError, match="lifecycle_events needs on_lifecycle_event"):
        Durability(context=live.ctx, handlers={"c": noop}, lifecycle_events=["registered"])
    quiet = Durability(context=live.ctx, handlers={"c": noop})
    await quiet.c(id="a", payload=None)
    await live.clock.run_until_idle()
    assert (await quiet.c.get_result("a")).status == "completed"
