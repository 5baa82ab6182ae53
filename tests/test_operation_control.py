"""Controlling durable operations: delayed registration, cancel, retry, listing, RetryAfter."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from _lab import open_lab
from _probe import Behaviour, Probe
from conftest import START_MS, LiveObject, MakeRuntime
from durability import (
    CancelledEvent,
    DuplicateDurableCallError,
    Durability,
    DurabilityAlarms,
    DurableAlarmInfo,
    DurableCall,
    DurableCancelledError,
    DurableOperation,
    OperationResult,
    RetriedEvent,
    RetryAfter,
    RetryPolicy,
    now_ms,
)
from durability._operations.records import list_query
from durability.cloudflare import adapt
from durability.runtime import DurableObject
from durability.testing import VirtualClock

pytestmark = pytest.mark.usefixtures("host")


class Control(DurableObject):
    """An object with two operations whose handlers do what the probe says."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.probe: Probe = env["PROBE"]
        self.durability = Durability(
            context=ctx,
            handlers={"charge": self._handle, "refund": self._handle},
            on_lifecycle_event=self.probe.events.append,
            **self.probe.options,
        )

    async def _handle(self, call: DurableCall) -> Any:
        return await self.probe.attempt(call, {"attempt": call.attempt})

    async def register(self, id: str, **options: Any) -> None:
        await self.durability.charge(id, {"id": id}, **options)

    async def cancel(self, id: str, op: str = "charge") -> bool:
        return await self.durability.operation(op).cancel(id)

    async def retry(self, id: str, op: str = "charge") -> bool:
        return await self.durability.operation(op).retry(id)

    async def result(self, id: str) -> dict[str, Any]:
        return dataclasses.asdict(await self.durability.charge.get_result(id))

    async def wait(self, id: str, timeout_ms: int) -> dict[str, Any]:
        return dataclasses.asdict(await self.durability.charge.job(id).wait(timeout_ms=timeout_ms))

    async def listing(self, op: str = "charge", **options: Any) -> list[dict[str, Any]]:
        found = await self.durability.operation(op).list(**options)
        return [dataclasses.asdict(result) for result in found]

    async def plan(self, status: str | None, after: str | None) -> list[str]:
        query, bindings = list_query("charge", status, after)
        sql = adapt(self.ctx).storage.sql
        rows = sql.exec(f"EXPLAIN QUERY PLAN {query} LIMIT ?", *bindings, 10)
        return [str(row["detail"]) for row in rows]

    async def alarm_at(self) -> int | None:
        return await adapt(self.ctx).storage.get_alarm()

    async def alarm(self, info: Any = None) -> None:
        await self.durability.alarm(info)


def lab(probe: Probe) -> Any:
    return open_lab("CONTROL", Control, probe)


def parked(probe: Probe, name: str, *, heed_signal: bool = True) -> Behaviour:
    """Wait for the probe's gate `name` (or, when `heed_signal`, the call's abort)."""

    async def behave(call: DurableCall) -> Any:
        waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(probe.gate(name).wait())]
        if heed_signal:
            waits.append(asyncio.ensure_future(call.signal.wait()))
        _, rest = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for waiting in rest:
            waiting.cancel()
        return {"released": call.attempt}

    return behave


def failing(error: Callable[[], Exception] = lambda: RuntimeError("boom")) -> Behaviour:
    async def behave(call: DurableCall) -> Any:
        raise error()

    return behave


def attempts(probe: Probe, id: str) -> list[tuple[int, int]]:
    return [(attempt, at) for key, attempt, at in probe.calls if key == id]


# -- registration with run_at / delay_ms --------------------------------------------------


async def test_delay_ms_holds_the_first_attempt_until_then() -> None:
    """delay_ms: the call is pending with next_attempt_at = now + delay; it runs exactly then."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.register("a", delay_ms=5_000)
        await t.clock.advance(4_999)
        assert probe.calls == []
        result = await t.obj.result("a")
        assert (result["status"], result["attempt"], result["next_attempt_at"]) == (
            "pending",
            0,
            START_MS + 5_000,
        )
        await t.clock.advance(1)
        assert attempts(probe, "a") == [(1, START_MS + 5_000)]


async def test_run_at_in_ms_holds_the_first_attempt_and_a_past_one_runs_now() -> None:
    """run_at (ms): never earlier than that time; a time already past runs at once."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.register("later", run_at=START_MS + 60_000)
        await t.obj.register("past", run_at=START_MS - 60_000)
        await t.clock.run_until_idle()
        assert attempts(probe, "past") == [(1, START_MS)]
        await t.clock.advance(59_999)
        assert attempts(probe, "later") == []
        await t.clock.advance(1)
        assert attempts(probe, "later") == [(1, START_MS + 60_000)]


async def test_run_at_accepts_an_aware_datetime(live: LiveObject) -> None:
    """run_at may be an aware datetime; it is converted to epoch milliseconds."""
    ran: list[int] = []
    ops = Durability(context=live.ctx, handlers={"charge": lambda call: ran.append(now_ms())})
    when = datetime.fromtimestamp(START_MS / 1000, tz=UTC) + timedelta(seconds=10)
    await ops.charge("a", run_at=when)
    assert (await ops.charge.get_result("a")).next_attempt_at == START_MS + 10_000
    await live.clock.advance(10_000)
    assert ran == [START_MS + 10_000]


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"run_at": START_MS, "delay_ms": 5}, ValueError, "run_at and delay_ms"),
        ({"delay_ms": -1}, ValueError, "delay_ms must be a non-negative safe integer"),
        ({"delay_ms": 1.5}, TypeError, "delay_ms must be an integer"),
        ({"run_at": -5}, ValueError, "run_at must be a non-negative safe integer"),
        ({"run_at": "soon"}, TypeError, "run_at must be an integer"),
    ],
)
async def test_bad_schedule_options_raise_and_store_nothing(
    options: dict[str, Any], error: type[Exception], message: str
) -> None:
    """Both run_at and delay_ms, a negative delay or a wrong type raise; nothing is stored."""
    probe = Probe()
    async with lab(probe) as t:
        with pytest.raises(error, match=message):
            await t.obj.register("a", **options)
        assert (await t.obj.result("a"))["status"] == "not_found"
        assert await t.obj.alarm_at() is None


async def test_naive_datetime_run_at_is_rejected(live: LiveObject) -> None:
    """A naive datetime is ambiguous: ValueError naming run_at, nothing stored."""
    ops = Durability(context=live.ctx, handlers={"charge": lambda call: None})
    with pytest.raises(ValueError, match="run_at must be an aware datetime"):
        await ops.charge("a", run_at=datetime(2030, 1, 1))
    assert (await ops.charge.get_result("a")).status == "not_found"


async def test_delayed_call_survives_eviction_and_runs_on_time() -> None:
    """A delayed call is durable: after eviction the alarm runs it, not a moment early."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.register("a", delay_ms=60_000)
        assert await t.obj.alarm_at() == START_MS + 60_000
        await t.rt.evict(t.obj)
        await t.clock.advance(59_999)
        assert probe.calls == []
        await t.clock.advance(1)
        assert attempts(probe, "a") == [(1, START_MS + 60_000)]
        assert (await t.obj.result("a"))["status"] == "completed"


# -- cancel --------------------------------------------------------------------------------


async def test_cancel_pending_is_terminal_and_disarms_the_alarm() -> None:
    """A pending call becomes cancelled, never runs, and the alarm is reconciled with it."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.register("a", delay_ms=30_000)
        assert await t.obj.cancel("a") is True
        assert await t.obj.alarm_at() is None
        await t.clock.advance(600_000)
        assert probe.calls == []
        result = await t.obj.result("a")
        assert (result["status"], result["attempt"], result["error"]["name"]) == (
            "cancelled",
            0,
            "DurableCancelledError",
        )
        assert await t.obj.cancel("a") is False
        assert await t.obj.cancel("nobody") is False
        [event] = [e for e in probe.events if isinstance(e, CancelledEvent)]
        assert (event.type, event.operation, event.id, event.attempt, event.running) == (
            "cancelled",
            "charge",
            "a",
            0,
            False,
        )


async def test_cancel_is_false_for_completed_and_failed_calls() -> None:
    """Only pending calls can be cancelled; terminal ones are left as they are."""
    probe = Probe(retries=RetryPolicy(max_attempts=1))
    probe.behaviour["bad"] = failing()
    async with lab(probe) as t:
        await t.obj.register("good")
        await t.obj.register("bad")
        await t.clock.run_until_idle()
        assert await t.obj.cancel("good") is False
        assert await t.obj.cancel("bad") is False
        assert (await t.obj.result("good"))["status"] == "completed"
        assert (await t.obj.result("bad"))["status"] == "failed"


async def test_cancel_of_another_operations_id_raises() -> None:
    """An id stored for another operation raises DuplicateDurableCallError, changing nothing."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.register("a", delay_ms=1_000)
        with pytest.raises(DuplicateDurableCallError):
            await t.obj.cancel("a", "refund")
        assert (await t.obj.result("a"))["status"] == "pending"


@pytest.mark.parametrize("outcome", ["returns", "raises"])
async def test_cancel_running_aborts_its_signal_and_its_outcome_stays_cancelled(
    outcome: str,
) -> None:
    """A running call's signal is aborted with DurableCancelledError; whatever the handler
    does afterwards, the call is cancelled and never retried."""
    probe = Probe()
    handler = parked(probe, "a", heed_signal=False)

    async def behave(call: DurableCall) -> Any:
        await handler(call)
        if outcome == "raises":
            raise RuntimeError("after cancel")
        return {"late": True}

    probe.behaviour["a"] = behave
    async with lab(probe) as t:
        await t.obj.register("a")
        await t.clock.run_until_idle()
        waiter = asyncio.ensure_future(t.obj.wait("a", 60_000))
        await t.clock.run_until_idle()
        assert await t.obj.cancel("a") is True
        assert (await waiter)["status"] == "cancelled"
        signal = probe.signals["a"]
        assert signal.aborted and isinstance(signal.reason, DurableCancelledError)
        probe.gate("a").set()
        await t.clock.advance(600_000)
        result = await t.obj.result("a")
        assert (result["status"], result["attempt"]) == ("cancelled", 1)
        assert len(probe.calls) == 1
        [event] = [e for e in probe.events if isinstance(e, CancelledEvent)]
        assert (event.attempt, event.running) == (1, True)


async def test_cancel_survives_eviction() -> None:
    """A cancelled call stays cancelled across eviction: the alarm never runs it."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.register("a", delay_ms=20_000)
        await t.obj.register("b", delay_ms=20_000)
        assert await t.obj.cancel("a") is True
        await t.rt.evict(t.obj)
        await t.clock.advance(600_000)
        assert [key for key, _, _ in probe.calls] == ["b"]
        assert (await t.obj.result("a"))["status"] == "cancelled"


# -- retry ---------------------------------------------------------------------------------


async def test_retry_of_a_failed_call_restarts_its_attempts_at_one() -> None:
    """A failed call is pending again with a fresh budget; attempts count from 1 again."""
    probe = Probe(retries=RetryPolicy(max_attempts=2, delay=lambda attempt: 100))
    probe.behaviour["a"] = failing()
    async with lab(probe) as t:
        await t.obj.register("a")
        await t.clock.advance(100)
        assert (await t.obj.result("a"))["status"] == "failed"
        del probe.behaviour["a"]
        assert await t.obj.retry("a") is True
        await t.clock.run_until_idle()
        assert attempts(probe, "a") == [(1, START_MS), (2, START_MS + 100), (1, START_MS + 100)]
        result = await t.obj.result("a")
        assert (result["status"], result["result"]) == ("completed", {"attempt": 1})
        [event] = [e for e in probe.events if isinstance(e, RetriedEvent)]
        assert (event.type, event.operation, event.id, event.attempt) == (
            "retried",
            "charge",
            "a",
            0,
        )
        assert event.generation != probe.events[0].generation


async def test_retry_is_false_for_pending_completed_and_missing_calls() -> None:
    """Only failed or cancelled calls can be retried."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.register("done")
        await t.obj.register("waiting", delay_ms=10_000)
        await t.clock.run_until_idle()
        assert await t.obj.retry("done") is False
        assert await t.obj.retry("waiting") is False
        assert await t.obj.retry("nobody") is False
        assert not [e for e in probe.events if isinstance(e, RetriedEvent)]


async def test_retry_of_a_cancelled_call_runs_it_again() -> None:
    """A cancelled call that is retried runs as attempt 1 and completes."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.register("a", delay_ms=10_000)
        await t.obj.cancel("a")
        assert await t.obj.retry("a") is True
        await t.clock.run_until_idle()
        assert attempts(probe, "a") == [(1, START_MS)]
        assert (await t.obj.result("a"))["status"] == "completed"


async def test_retry_after_cancel_never_overlaps_the_cancelled_handler() -> None:
    """A cancelled handler that ignores its signal still holds the key: the retried
    call's first attempt starts only after it ended, and the late result is ignored."""
    probe = Probe()
    probe.behaviour["a"] = parked(probe, "a", heed_signal=False)
    async with lab(probe) as t:
        await t.obj.register("a")
        await t.clock.run_until_idle()
        await t.obj.cancel("a")
        assert await t.obj.retry("a") is True
        await t.clock.advance(1_000)
        assert len(probe.calls) == 1
        del probe.behaviour["a"]
        probe.gate("a").set()
        await t.clock.advance(1_000)
        assert [attempt for _, attempt, _ in probe.calls] == [1, 1]
        assert probe.max_per_key == 1
        result = await t.obj.result("a")
        assert (result["status"], result["result"]) == ("completed", {"attempt": 1})


async def test_retry_survives_eviction() -> None:
    """A retried call is durable: held back by a busy permit, it runs after eviction (and
    before the interrupted call, which runs again alone, as its next attempt: with one
    permit it had run alone when it was cut off)."""
    probe = Probe(alarm_concurrency=1)
    park = parked(probe, "block", heed_signal=False)

    async def block_first_attempt(call: DurableCall) -> Any:
        return await park(call) if call.attempt == 1 else None

    probe.behaviour["block"] = block_first_attempt
    async with lab(probe) as t:
        await t.obj.register("block")
        await t.obj.register("a", delay_ms=5_000)
        await t.obj.cancel("a")
        assert await t.obj.retry("a") is True
        assert [key for key, _, _ in probe.calls] == ["block"]
        await t.rt.evict(t.obj)
        await t.clock.advance(60_000)
        assert [(key, attempt) for key, attempt, _ in probe.calls] == [
            ("block", 1),
            ("a", 1),
            ("block", 2),
        ]
        assert (await t.obj.result("a"))["status"] == "completed"


async def test_retry_arms_the_alarm_with_its_write() -> None:
    """With every permit busy and nothing else pending, a retried call is started by the
    alarm its own transaction armed, also after eviction."""
    probe = Probe(alarm_concurrency=1, retries=RetryPolicy(max_attempts=1))
    probe.behaviour["b"] = failing()
    probe.behaviour["block"] = parked(probe, "block", heed_signal=False)
    async with lab(probe) as t:
        await t.obj.register("b")
        await t.clock.run_until_idle()
        await t.obj.register("block")
        await t.clock.run_until_idle()
        await t.obj.cancel("block")
        assert await t.obj.alarm_at() is None
        del probe.behaviour["b"]
        assert await t.obj.retry("b") is True
        assert await t.obj.alarm_at() == START_MS + 15_000
        await t.rt.evict(t.obj)
        await t.clock.advance(15_000)
        assert attempts(probe, "b") == [(1, START_MS), (1, START_MS + 15_000)]
        assert (await t.obj.result("b"))["status"] == "completed"


async def test_cancel_and_retry_survive_a_restart(
    tmp_path: Path, make_runtime: MakeRuntime
) -> None:
    """A cancel and a retry written before the runtime stopped hold after it restarts on
    the same files: the cancelled call never runs, the retried one runs as attempt 1
    (once the call that held the only permit is failed, its interrupted attempt its last)."""
    probe = Probe(alarm_concurrency=1, retries=RetryPolicy(max_attempts=1))
    probe.behaviour["f"] = failing()
    probe.behaviour["block"] = parked(probe, "block", heed_signal=False)
    async with open_lab("CONTROL", Control, probe, tmp_path) as t:
        await t.obj.register("f")
        await t.clock.run_until_idle()
        await t.obj.register("block")
        await t.obj.register("a", delay_ms=20_000)
        await t.clock.run_until_idle()
        del probe.behaviour["f"]
        assert await t.obj.retry("f") is True
        assert await t.obj.cancel("a") is True
    clock = VirtualClock(START_MS + 1_000)
    bindings = {"CONTROL": Control, "PROBE": probe}
    async with make_runtime(bindings=bindings, clock=clock, path=tmp_path) as rt:
        obj = rt.env["CONTROL"].get_by_name("a")
        await clock.advance(60_000)
        assert [(key, attempt) for key, attempt, _ in probe.calls] == [
            ("f", 1),
            ("block", 1),
            ("f", 1),
        ]
        assert [(r["id"], r["status"]) for r in await obj.listing()] == [
            ("a", "cancelled"),
            ("block", "failed"),
            ("f", "completed"),
        ]


# -- listing -------------------------------------------------------------------------------


async def test_list_orders_by_id_filters_by_status_and_pages_by_after() -> None:
    """list(): one operation's calls in id order, filtered by status, paged by `after`."""
    probe = Probe()
    async with lab(probe) as t:
        for key in ("c", "a", "e", "b", "d"):
            await t.obj.register(key, delay_ms=0 if key in "ace" else 10_000)
        await t.obj.cancel("d")
        await t.clock.run_until_idle()
        everything = await t.obj.listing()
        assert [(r["id"], r["operation"], r["status"]) for r in everything] == [
            ("a", "charge", "completed"),
            ("b", "charge", "pending"),
            ("c", "charge", "completed"),
            ("d", "charge", "cancelled"),
            ("e", "charge", "completed"),
        ]
        assert everything[0]["result"] == {"attempt": 1}
        first = await t.obj.listing(limit=2)
        assert [r["id"] for r in first] == ["a", "b"]
        second = await t.obj.listing(limit=2, after=first[-1]["id"])
        assert [r["id"] for r in second] == ["c", "d"]
        assert [r["id"] for r in await t.obj.listing(limit=2, after="d")] == ["e"]
        completed = await t.obj.listing(status="completed", after="a")
        assert [r["id"] for r in completed] == ["c", "e"]
        assert [r["id"] for r in await t.obj.listing(status="cancelled")] == ["d"]
        assert await t.obj.listing("refund") == []


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"status": "not_found"}, ValueError, "status must be one of"),
        ({"status": "done"}, ValueError, "status must be one of"),
        ({"status": 5}, TypeError, "status must be a string or None, got int"),
        ({"status": ["pending"]}, TypeError, "status must be a string or None, got list"),
        ({"limit": 0}, ValueError, "limit must be a positive integer"),
        ({"limit": "5"}, TypeError, "limit must be an integer"),
        ({"after": 5}, TypeError, "after must be a string or None"),
    ],
)
async def test_list_rejects_bad_options(
    options: dict[str, Any], error: type[Exception], message: str
) -> None:
    """A bad status, limit or cursor raises, naming the option."""
    async with lab(Probe()) as t:
        with pytest.raises(error, match=message):
            await t.obj.listing(**options)


@pytest.mark.parametrize("status", [None, "failed"])
@pytest.mark.parametrize("after", [None, "k"])
async def test_list_pages_are_served_by_an_index(status: str | None, after: str | None) -> None:
    """Every listing query searches an index in id order: no table scan, no sort."""
    async with lab(Probe()) as t:
        await t.obj.register("a")
        plan = " | ".join(await t.obj.plan(status, after))
        index = "durability_calls_open_idx" if status else "durability_calls_operation_idx"
        assert f"SEARCH durability_calls USING INDEX {index}" in plan
        assert "SCAN" not in plan and "TEMP B-TREE" not in plan


def test_list_is_keyword_only_with_documented_defaults() -> None:
    """list(*, status=None, limit=100, after=None); registration's schedule options too."""
    listing = inspect.signature(DurableOperation.list).parameters
    assert {name: (p.kind, p.default) for name, p in listing.items() if name != "self"} == {
        "status": (inspect.Parameter.KEYWORD_ONLY, None),
        "limit": (inspect.Parameter.KEYWORD_ONLY, 100),
        "after": (inspect.Parameter.KEYWORD_ONLY, None),
    }
    call = inspect.signature(DurableOperation.__call__).parameters
    assert (call["run_at"].kind, call["run_at"].default) == (inspect.Parameter.KEYWORD_ONLY, None)
    assert (call["delay_ms"].kind, call["delay_ms"].default) == (
        inspect.Parameter.KEYWORD_ONLY,
        None,
    )


async def test_results_name_their_call_but_compare_by_state(live: LiveObject) -> None:
    """OperationResult carries id and operation; equality still compares the stored state."""
    ops = Durability(context=live.ctx, handlers={"charge": lambda call: None})
    missing = await ops.charge.get_result("none")
    assert (missing.id, missing.operation) == ("none", "charge")
    assert missing == OperationResult(status="not_found")


# -- RetryAfter ----------------------------------------------------------------------------


async def test_retry_after_sets_exactly_the_next_attempt_time() -> None:
    """RetryAfter(delay_ms) replaces the policy delay: the next attempt is due exactly then."""
    probe = Probe(retries=RetryPolicy(delay=lambda attempt: 1))

    async def behave(call: DurableCall) -> Any:
        if call.attempt == 1:
            raise RetryAfter(7_000)
        return "ok"

    probe.behaviour["a"] = behave
    async with lab(probe) as t:
        await t.obj.register("a")
        await t.clock.run_until_idle()
        result = await t.obj.result("a")
        assert (result["status"], result["next_attempt_at"], result["last_error"]) == (
            "pending",
            START_MS + 7_000,
            "Retry requested after 7000ms",
        )
        await t.clock.advance(6_999)
        assert len(probe.calls) == 1
        await t.clock.advance(1)
        assert attempts(probe, "a") == [(1, START_MS), (2, START_MS + 7_000)]


async def test_retry_after_is_still_bounded_by_max_attempts() -> None:
    """A handler that always asks to retry later fails at max_attempts with RetryAfter."""
    probe = Probe(retries=RetryPolicy(max_attempts=3))
    probe.behaviour["a"] = failing(lambda: RetryAfter(50))
    async with lab(probe) as t:
        await t.obj.register("a")
        await t.clock.advance(10_000)
        assert attempts(probe, "a") == [(1, START_MS), (2, START_MS + 50), (3, START_MS + 100)]
        result = await t.obj.result("a")
        assert (result["status"], result["error"]["name"]) == ("failed", "RetryAfter")


async def test_retry_after_logs_at_info_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A requested retry is not a failure: INFO, no traceback, with when it is due."""
    probe = Probe()

    async def behave(call: DurableCall) -> Any:
        if call.attempt == 1:
            raise RetryAfter(2_000)
        return "ok"

    probe.behaviour["a"] = behave
    caplog.set_level(logging.INFO, logger="durability.operations")
    async with lab(probe) as t:
        await t.obj.register("a")
        await t.clock.run_until_idle()
    [record] = [r for r in caplog.records if r.name == "durability.operations"]
    assert (record.levelno, record.exc_info) == (logging.INFO, None)
    assert (record.error_name, record.retry_in_ms) == ("RetryAfter", 2_000)  # type: ignore[attr-defined]


def test_retry_after_validates_its_delay() -> None:
    """RetryAfter needs a non-negative integer delay."""
    with pytest.raises(ValueError, match="delay_ms must be a non-negative safe integer"):
        RetryAfter(-1)
    with pytest.raises(TypeError, match="delay_ms must be an integer"):
        RetryAfter(1.5)  # type: ignore[arg-type]
    assert RetryAfter(0).delay_ms == 0


async def test_retry_after_also_sets_a_named_alarms_next_attempt(live: LiveObject) -> None:
    """A named alarm handler raising RetryAfter is retried after exactly that delay."""
    runs: list[tuple[int, int]] = []

    def renew(info: DurableAlarmInfo) -> None:
        runs.append((info.attempt, now_ms()))
        if info.attempt == 1:
            raise RetryAfter(3_000)

    alarms = DurabilityAlarms(context=live.ctx, handlers={"renew": renew})
    await alarms.renew(START_MS + 1_000)
    await live.clock.advance(3_999)
    assert runs == [(1, START_MS + 1_000)]
    await live.clock.advance(1)
    assert runs == [(1, START_MS + 1_000), (2, START_MS + 4_000)]
