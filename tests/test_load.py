"""RoutingLoad: in-flight counts, one minute of one-second buckets, snapshots."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from conftest import START_MS
from durability import EnqueueResult, LoadSnapshot, RoutingLoad, SerializedError
from durability.routing import InboundLoad, OutboundLoad
from durability.testing import VirtualClock


async def test_empty_snapshot_has_no_average() -> None:
    """Without samples the average is None, never 0, and the window is 60 s."""
    async with VirtualClock(START_MS):
        snapshot = RoutingLoad().snapshot(0)
    assert snapshot == LoadSnapshot(
        observed_at=START_MS,
        window_ms=60_000,
        inbound=InboundLoad(in_flight=0, completed=0, average_processing_ms=None),
        outbound=OutboundLoad(
            in_flight=0, completed=0, average_processing_ms=None, pending_deliveries=0
        ),
    )


async def test_begin_counts_in_flight_and_finish_records_duration() -> None:
    """begin() counts a request in flight; its finisher completes it with its duration."""
    async with VirtualClock(START_MS) as clock:
        load = RoutingLoad()
        finish = load.begin("inbound")
        assert load.snapshot().inbound.in_flight == 1
        await clock.advance(250)
        finish()
        snapshot = load.snapshot(7)
    assert snapshot.inbound == InboundLoad(0, 1, 250.0)
    assert snapshot.outbound == OutboundLoad(0, 0, None, 7)


async def test_finisher_is_idempotent() -> None:
    """Calling a finisher twice completes the request once."""
    async with VirtualClock(START_MS):
        load = RoutingLoad()
        finish = load.begin("outbound")
        finish()
        finish()
        snapshot = load.snapshot()
    assert snapshot.outbound.in_flight == 0
    assert snapshot.outbound.completed == 1


async def test_average_over_several_completions() -> None:
    """The average is the summed duration over the window's completions."""
    async with VirtualClock(START_MS) as clock:
        load = RoutingLoad()
        first = load.begin("inbound")
        second = load.begin("inbound")
        await clock.advance(100)
        first()
        await clock.advance(200)
        second()
        snapshot = load.snapshot()
    assert snapshot.inbound.completed == 2
    assert snapshot.inbound.average_processing_ms == 200.0


async def test_completions_leave_the_window_after_sixty_seconds() -> None:
    """A completion counts for 60 one-second buckets, then drops out."""
    async with VirtualClock(START_MS) as clock:
        load = RoutingLoad()
        load.begin("inbound")()
        await clock.advance(59_000)
        assert load.snapshot().inbound.completed == 1
        await clock.advance(1_000)
        snapshot = load.snapshot()
    assert snapshot.inbound.completed == 0
    assert snapshot.inbound.average_processing_ms is None


async def test_reused_bucket_is_reset() -> None:
    """A slot holding an older second is reset before a new completion is counted."""
    async with VirtualClock(START_MS) as clock:
        load = RoutingLoad()
        load.begin("inbound")()
        await clock.advance(60_000)
        load.begin("inbound")()
        snapshot = load.snapshot()
    assert snapshot.inbound.completed == 1


async def test_snapshots_between_completions_count_each_one() -> None:
    """A snapshot taken between completions, in one second or across seconds, is exact."""
    async with VirtualClock(START_MS) as clock:
        load = RoutingLoad()
        seen: list[tuple[int, float | None]] = []
        for step in (0, 100, 100, 1_000, 58_800, 100, 1_000):
            await clock.advance(step)
            snapshot = load.snapshot().inbound
            seen.append((snapshot.completed, snapshot.average_processing_ms))
            finish = load.begin("inbound")
            await clock.advance(10)
            finish()
        snapshot = load.snapshot().inbound
        seen.append((snapshot.completed, snapshot.average_processing_ms))
    assert [completed for completed, _ in seen] == [0, 1, 2, 3, 1, 2, 2, 3]
    assert {average for _, average in seen[1:]} == {10.0}


async def test_in_flight_survives_the_window() -> None:
    """A long request stays in flight past 60 s."""
    async with VirtualClock(START_MS) as clock:
        load = RoutingLoad()
        finish = load.begin("outbound")
        await clock.advance(120_000)
        assert load.snapshot().outbound.in_flight == 1
        finish()
        snapshot = load.snapshot()
    assert snapshot.outbound == OutboundLoad(0, 1, 120_000.0, 0)


async def test_directions_are_independent() -> None:
    """Inbound and outbound are counted separately."""
    async with VirtualClock(START_MS):
        load = RoutingLoad()
        load.begin("outbound")
        snapshot = load.snapshot()
    assert snapshot.inbound.in_flight == 0
    assert snapshot.outbound.in_flight == 1


def test_bad_direction_and_pending_are_rejected() -> None:
    """An unknown direction or a negative backlog raises, naming the argument."""
    load = RoutingLoad()
    with pytest.raises(ValueError, match="direction"):
        load.begin("sideways")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pending_deliveries"):
        load.snapshot(-1)
    with pytest.raises(TypeError, match="pending_deliveries"):
        load.snapshot(1.5)  # type: ignore[arg-type]


def test_enqueue_result_is_frozen() -> None:
    """EnqueueResult is an immutable value carrying an error as SerializedError."""
    snapshot = RoutingLoad().snapshot()
    result: EnqueueResult[list[int]] = EnqueueResult(
        False, None, SerializedError("LogAppendError", "no"), snapshot
    )
    with pytest.raises(AttributeError):
        result.success = True  # type: ignore[misc]
    assert result.error == SerializedError("LogAppendError", "no")


def _values(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def test_load_snapshot_directions_have_documented_fields() -> None:
    """`inbound` has in_flight/completed/average_processing_ms; `outbound` adds pending."""
    snapshot = RoutingLoad().snapshot(3)
    assert snapshot.window_ms == 60_000
    assert _values(snapshot.inbound) == {
        "in_flight": 0,
        "completed": 0,
        "average_processing_ms": None,
    }
    assert _values(snapshot.outbound) == {
        "in_flight": 0,
        "completed": 0,
        "average_processing_ms": None,
        "pending_deliveries": 3,
    }


def test_results_round_trip_as_json_with_camel_case_keys() -> None:
    """to_json() gives the upstream JSON shape; from_json() reads it (and snake_case) back."""
    snapshot = LoadSnapshot(START_MS, 60_000, InboundLoad(1, 2, 3.5), OutboundLoad(0, 4, None, 9))
    result: EnqueueResult[list[int]] = EnqueueResult(
        False, None, SerializedError("LogAppendError", "no"), snapshot
    )
    data = result.to_json()
    assert data["load"] == {
        "observedAt": START_MS,
        "windowMs": 60_000,
        "inbound": {"inFlight": 1, "completed": 2, "averageProcessingMs": 3.5},
        "outbound": {
            "inFlight": 0,
            "completed": 4,
            "averageProcessingMs": None,
            "pendingDeliveries": 9,
        },
    }
    assert data["error"] == {"name": "LogAppendError", "message": "no"}
    assert EnqueueResult.from_json(data) == result
    snake = {
        "observed_at": float(START_MS),
        "window_ms": 60_000,
        "inbound": {"in_flight": 1, "completed": 2, "average_processing_ms": 3.5},
        "outbound": {
            "in_flight": 0,
            "completed": 4,
            "average_processing_ms": None,
            "pending_deliveries": 9,
        },
    }
    assert LoadSnapshot.from_json(snake) == snapshot


def test_from_json_names_the_bad_field() -> None:
    """A malformed result or load raises TypeError naming the field."""
    good = RoutingLoad().snapshot().to_json()
    with pytest.raises(TypeError, match=r"result\.success must be a bool"):
        EnqueueResult.from_json({"success": 1, "load": good})
    outbound = dict(good["outbound"])  # type: ignore[arg-type]
    del outbound["pendingDeliveries"]
    with pytest.raises(TypeError, match=r"load\.outbound\.pending_deliveries is missing"):
        LoadSnapshot.from_json({**good, "outbound": outbound})
    with pytest.raises(TypeError, match=r"load\.observed_at must be an integer"):
        LoadSnapshot.from_json({**good, "observedAt": "now"})
    with pytest.raises(TypeError, match="load must be a mapping"):
        LoadSnapshot.from_json([1])
