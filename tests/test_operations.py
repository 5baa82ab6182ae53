"""Durable operations on the real runtime under a virtual clock."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from _lab import Lab, open_lab
from _probe import Behaviour, Probe
from conftest import START_MS, LiveObject, MakeRuntime, noop
from durability import (
    AbortSignal,
    AttemptSettledEvent,
    AttemptStartedEvent,
    DuplicateDurableCallError,
    Durability,
    DurabilityLog,
    DurabilityScheduler,
    DurableAttemptTimeoutError,
    DurableCall,
    LogAppendInput,
    MethodOptions,
    NonRetryableError,
    OperationResult,
    PurgedEvent,
    RegisteredEvent,
    RetryPolicy,
    SerializedError,
    TerminalEvent,
    now_ms,
)
from durability.cloudflare import adapt
from durability.runtime import DurableObject
from durability.testing import VirtualClock

pytestmark = pytest.mark.usefixtures("host")


class Ops(DurableObject):
    """An object with two operations whose handlers do what the probe says."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.probe: Probe = env["PROBE"]
        self.scheduler = DurabilityScheduler(context=ctx, **self.probe.scheduler_options)
        self.durability = Durability(
            scheduler=self.scheduler,
            handlers={"charge": self._handle, "refund": self._handle, "plain": self._plain},
            on_lifecycle_event=self.probe.events.append,
            **self.probe.options,
        )

    async def _handle(self, call: DurableCall) -> Any:
        return await self.probe.attempt(call, {"id": call.id, "payload": call.payload})

    def _plain(self, call: DurableCall) -> None:
        self.probe.attempt_now(call)

    async def register(self, op: str, id: str, payload: Any = None) -> None:
        await self.durability.operation(op)(id=id, payload=payload)

    async def result(self, op: str, id: str) -> dict[str, Any]:
        return dataclasses.asdict(await self.durability.operation(op).get_result(id))

    async def wait(self, op: str, id: str, timeout_ms: int) -> dict[str, Any]:
        job = self.durability.operation(op).job(id)
        return dataclasses.asdict(await job.wait(timeout_ms=timeout_ms))

    async def purge(self, before: int) -> int:
        return await self.durability.purge_before(before=before)

    async def attempts_stored(self, id: str) -> int:
        storage = adapt(self.ctx).storage
        row = storage.sql.exec("SELECT attempt FROM durability_calls WHERE id = ?", id)
        return int(row.one()["attempt"])

    async def alarm_at(self) -> int | None:
        return await adapt(self.ctx).storage.get_alarm()

    async def names(self) -> list[Any]:
        same = self.durability.charge is self.durability.operation("charge")
        outcomes: list[Any] = [same]
        for lookup in (lambda: self.durability.operation("nope"), lambda: self.durability.nope):
            try:
                lookup()
            except (ValueError, AttributeError) as error:
                outcomes.append(type(error).__name__)
        return outcomes

    async def alarm(self, info: Any = None) -> None:
        await self.scheduler.alarm(info)


def _clock_now() -> int:
    return now_ms()


def lab(probe: Probe, path: Path | None = None) -> AbstractAsyncContextManager[Lab[Probe]]:
    return open_lab("OPS", Ops, probe, path)


def failing(times: int, error: Callable[[], Exception] = lambda: RuntimeError("boom")) -> Behaviour:
    async def behave(call: DurableCall) -> Any:
        if call.attempt <= times:
            raise error()
        return {"attempt": call.attempt}

    return behave


def parked(probe: Probe, name: str) -> Behaviour:
    async def behave(call: DurableCall) -> Any:
        await probe.gate(name).wait()
        return {"released": call.attempt}

    return behave


async def test_registered_call_runs_at_once_and_completes() -> None:
    """A registration with a free permit runs the handler eagerly; the result is stored."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.register("charge", "inv-1", {"amount": 5})
        await t.clock.run_until_idle()
        assert probe.calls == [("inv-1", 1, START_MS)]
        assert await t.obj.result("charge", "inv-1") == {
            "status": "completed",
            "result": {"id": "inv-1", "payload": {"amount": 5}},
            "attempt": 1,
            "next_attempt_at": None,
            "last_error": None,
            "error": None,
            "id": "inv-1",
            "operation": "charge",
        }
        assert await t.obj.alarm_at() is None


async def test_sync_handler_returning_none_completes_with_null() -> None:
    """A plain function handler runs inline; returning None stores JSON null."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.register("plain", "p")
        await t.clock.run_until_idle()
        result = await t.obj.result("plain", "p")
        assert (result["status"], result["result"], result["attempt"]) == ("completed", None, 1)


async def test_operation_results_by_status(live: LiveObject) -> None:
    """`get_result` reports not_found, pending, completed and failed with their fields."""

    def charge(call: DurableCall) -> Any:
        if call.payload == "stop":
            raise NonRetryableError("card declined")
        if call.payload == "flaky" and call.attempt == 1:
            raise RuntimeError("try later")
        return {"id": call.id, "attempt": call.attempt}

    operations = Durability(context=live.ctx, handlers={"charge": charge})
    assert operations.operation("charge") is operations.charge
    assert await operations.charge.get_result("none") == OperationResult(status="not_found")
    await operations.charge(id="ok", payload="fine")
    await operations.charge(id="stop", payload="stop")
    await operations.charge(id="flaky", payload="flaky")
    await live.clock.run_until_idle()
    assert await operations.charge.job("ok").wait(timeout_ms=1) == OperationResult(
        status="completed", result={"id": "ok", "attempt": 1}, attempt=1
    )
    assert await operations.charge.get_result("stop") == OperationResult(
        status="failed", attempt=1, error=SerializedError("NonRetryableError", "card declined")
    )
    pending = await operations.charge.get_result("flaky")
    assert (pending.status, pending.attempt, pending.last_error) == ("pending", 1, "try later")
    assert pending.next_attempt_at is not None
    assert START_MS + 500 <= pending.next_attempt_at <= START_MS + 1000


async def test_failed_attempts_retry_after_the_policy_delay() -> None:
    """Failures are retried at now + delay(attempt) until an attempt succeeds."""
    probe = Probe(retries=RetryPolicy(delay=lambda attempt: 1000 * attempt))
    probe.behaviour["a"] = failing(2)
    async with lab(probe) as t:
        await t.obj.register("charge", "a")
        await t.clock.run_until_idle()
        assert await t.obj.result("charge", "a") == {
            "status": "pending",
            "result": None,
            "attempt": 1,
            "next_attempt_at": START_MS + 1000,
            "last_error": "boom",
            "error": None,
            "id": "a",
            "operation": "charge",
        }
        await t.clock.advance(3000)
        assert probe.calls == [
            ("a", 1, START_MS),
            ("a", 2, START_MS + 1000),
            ("a", 3, START_MS + 3000),
        ]
        result = await t.obj.result("charge", "a")
        assert (result["status"], result["result"]) == ("completed", {"attempt": 3})


async def test_every_attempt_failing_ends_failed_at_max_attempts() -> None:
    """After max_attempts failures the call is failed with the last error."""
    probe = Probe(retries=RetryPolicy(max_attempts=3, delay=lambda attempt: 10))
    probe.behaviour["a"] = failing(99, lambda: ValueError("nope"))
    async with lab(probe) as t:
        await t.obj.register("charge", "a")
        await t.clock.advance(1000)
        assert [attempt for _, attempt, _ in probe.calls] == [1, 2, 3]
        assert await t.obj.result("charge", "a") == {
            "status": "failed",
            "result": None,
            "attempt": 3,
            "next_attempt_at": None,
            "last_error": None,
            "error": {"name": "ValueError", "message": "nope"},
            "id": "a",
            "operation": "charge",
        }


ForeignNonRetryable = type("NonRetryableError", (Exception,), {})
"""Another library's error of the same name (matched by name, not by class)."""


@pytest.mark.parametrize("cls", [NonRetryableError, ForeignNonRetryable])
async def test_non_retryable_errors_fail_at_once(cls: type[Exception]) -> None:
    """NonRetryableError, ours or any class of that name, fails without retries."""
    probe = Probe()
    probe.behaviour["a"] = failing(99, lambda: cls("stop"))
    async with lab(probe) as t:
        await t.obj.register("charge", "a")
        await t.clock.advance(60_000)
        assert len(probe.calls) == 1
        result = await t.obj.result("charge", "a")
        assert (result["status"], result["error"]) == (
            "failed",
            {"name": "NonRetryableError", "message": "stop"},
        )


class Keys(DurableObject):
    """Operations that record the idempotency key of every attempt."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.seen: list[tuple[str, int, str]] = env["PROBE"]
        handlers = {name: self._charge for name in ("charge", "a", "a:b")}
        retries = RetryPolicy(delay=lambda attempt: 1_000)
        self.durability = Durability(context=ctx, handlers=handlers, retries=retries)

    async def _charge(self, call: DurableCall[dict[str, int]]) -> None:
        self.seen.append((str(self.ctx.id.name), call.attempt, call.idempotency_key))
        if call.attempt == 1:
            raise RuntimeError("provider timeout")

    async def register(self, operation: str, id: str) -> None:
        await self.durability.operation(operation)(id, {"cents": 500})

    async def alarm(self, info: Any = None) -> None:
        await self.durability.alarm(info)


async def test_idempotency_key_is_stable_per_call_and_unique_across_objects(
    make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """Every attempt of a call sees one key; it names the object, operation and id."""
    seen: list[tuple[str, int, str]] = []
    async with make_runtime(bindings={"KEYS": Keys, "PROBE": seen}) as rt:
        first, second = rt.env.KEYS.get_by_name("first"), rt.env.KEYS.get_by_name("second")
        await first.register("charge", "inv-1")
        await second.register("charge", "inv-1")
        await clock.advance(2_000)
        keys = {(name, attempt): key for name, attempt, key in seen}
        assert keys[("first", 1)] == keys[("first", 2)]
        assert keys[("second", 1)] == keys[("second", 2)]
        assert keys[("first", 1)] != keys[("second", 1)]
        first_id = str(rt.env.KEYS.id_from_name("first"))
        assert keys[("first", 1)] == f"durability-call:v1:{first_id}:charge:inv-1"


async def test_idempotency_key_escapes_the_operation_name(
    make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """Operation "a:b" with id "c" and operation "a" with id "b:c" get different keys."""
    seen: list[tuple[str, int, str]] = []
    async with make_runtime(bindings={"KEYS": Keys, "PROBE": seen}) as rt:
        obj = rt.env.KEYS.get_by_name("one")
        await obj.register("a:b", "c")
        await obj.register("a", "b:c")
        await clock.run_until_idle()
        first, second = (key for _, _, key in seen)
        assert first.endswith(":a%3Ab:c") and second.endswith(":a:b:c")


class CardDeclinedError(Exception):
    """A payment vendor's exception, not ours."""


async def test_policy_non_retryable_classes_fail_at_once() -> None:
    """An exception of a class in RetryPolicy.non_retryable fails the call on attempt 1."""
    probe = Probe(retries=RetryPolicy(non_retryable=(CardDeclinedError,)))
    probe.behaviour["a"] = failing(99, lambda: CardDeclinedError("insufficient funds"))
    probe.behaviour["b"] = failing(1, lambda: KeyError("transient"))
    async with lab(probe) as t:
        await t.obj.register("charge", "a")
        await t.obj.register("charge", "b")
        await t.clock.advance(60_000)
        assert [(id, attempt) for id, attempt, _ in probe.calls] == [("a", 1), ("b", 1), ("b", 2)]
        result = await t.obj.result("charge", "a")
        assert (result["status"], result["attempt"], result["error"]) == (
            "failed",
            1,
            {"name": "CardDeclinedError", "message": "insufficient funds"},
        )
        assert (await t.obj.result("charge", "b"))["status"] == "completed"


def _raise(attempt: int) -> int:
    raise RuntimeError("policy bug")


@pytest.mark.parametrize(
    "delay",
    [
        lambda a: -1,
        lambda a: float("nan"),
        lambda a: float("inf"),
        lambda a: "1",
        _raise,
        lambda a: 2**60,
    ],
)
async def test_broken_retry_policy_is_a_terminal_policy_error(delay: Any) -> None:
    """A delay that raises or is not a finite safe non-negative number fails the call."""
    probe = Probe(retries=RetryPolicy(delay=delay))
    probe.behaviour["a"] = failing(99)
    async with lab(probe) as t:
        await t.obj.register("charge", "a")
        await t.clock.advance(60_000)
        assert len(probe.calls) == 1
        result = await t.obj.result("charge", "a")
        assert result["status"] == "failed"
        assert result["error"] == {
            "name": "DurableRetryPolicyError",
            "message": 'Retry policy for operation "charge" must produce a non-negative '
            "safe-integer timestamp",
        }


async def test_non_json_result_is_terminal_and_not_rerun() -> None:
    """A result that is not JSON fails the call with DurableResultSerializationError."""
    probe = Probe()

    async def returns_set(call: DurableCall) -> Any:
        return {1, 2}

    probe.behaviour["a"] = returns_set
    async with lab(probe) as t:
        await t.obj.register("charge", "a")
        await t.clock.advance(60_000)
        assert len(probe.calls) == 1
        result = await t.obj.result("charge", "a")
        assert result["error"] == {
            "name": "DurableResultSerializationError",
            "message": 'Result for durable operation "charge" is not JSON-serializable',
        }


async def test_non_json_result_fails_the_call_terminally(live: LiveObject) -> None:
    """A handler result that is not JSON fails the call with the serialization error."""
    calls: list[int] = []

    def handler(call: DurableCall) -> object:
        calls.append(call.attempt)
        return {1, 2}

    operations = Durability(context=live.ctx, handlers={"charge": handler})
    await operations.charge(id="a", payload=None)
    result = await operations.charge.job("a").wait(timeout_ms=1000)
    assert result.status == "failed"
    assert result.error == SerializedError(
        "DurableResultSerializationError",
        'Result for durable operation "charge" is not JSON-serializable',
    )
    assert calls == [1]


NOT_JSON = [{1, 2}, b"bytes", float("nan"), float("inf"), {1: "int key"}, object()]


@pytest.mark.parametrize("value", NOT_JSON, ids=lambda v: type(v).__name__)
async def test_non_json_payload_raises_type_error_and_stores_nothing(
    live: LiveObject, value: object
) -> None:
    """Operation payloads, log bodies and stub arguments that are not JSON raise TypeError."""
    operations = Durability(context=live.ctx, handlers={"charge": noop})
    log: DurabilityLog[Any] = DurabilityLog(context=live.ctx)
    with pytest.raises(TypeError):
        await operations.charge(id="a", payload=value)  # type: ignore[arg-type]
    assert (await operations.charge.get_result("a")).status == "not_found"
    with pytest.raises(TypeError):
        await log.append(LogAppendInput(value))
    assert (await log.bounds()).next_offset == 0
    with pytest.raises(TypeError):
        await live.stub.echo(value)


async def test_attempt_timeout_aborts_signal_cancels_task_and_retries() -> None:
    """On timeout the signal is aborted, the task cancelled, and the call retried."""
    probe = Probe(
        methods={"charge": MethodOptions(attempt_timeout_ms=2000)},
        retries=RetryPolicy(delay=lambda attempt: 500),
    )
    seen: list[str] = []

    async def slow_first(call: DurableCall) -> Any:
        if call.attempt == 1:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise
        return "done"

    probe.behaviour["a"] = slow_first
    async with lab(probe) as t:
        await t.obj.register("charge", "a")
        await t.clock.advance(2000)
        assert seen == ["cancelled"]
        signal = probe.signals["a"]
        assert signal.aborted
        assert isinstance(signal.reason, DurableAttemptTimeoutError)
        assert str(signal.reason) == 'Durable operation "charge" timed out after 2000ms'
        pending = await t.obj.result("charge", "a")
        assert (pending["status"], pending["next_attempt_at"]) == ("pending", START_MS + 2500)
        await t.clock.advance(500)
        assert (await t.obj.result("charge", "a"))["result"] == "done"
        assert [call[2] for call in probe.calls] == [START_MS, START_MS + 2500]


async def test_attempt_timeout_aborts_the_signal_and_cancels_the_handler(live: LiveObject) -> None:
    """On timeout the signal is aborted with the timeout error and the task is cancelled."""
    signals: list[AbortSignal] = []
    cancelled: list[bool] = []

    async def slow(call: DurableCall) -> None:
        signals.append(call.signal)
        try:
            await call.signal.wait()
            await asyncio.sleep(60)
        except BaseException:
            cancelled.append(True)
            raise

    operations = Durability(
        context=live.ctx,
        handlers={"slow": slow},
        attempt_timeout_ms=1000,
        retries=RetryPolicy(max_attempts=1),
    )
    await operations.slow(id="a", payload=None)
    await live.clock.advance(1000)
    signal = signals[0]
    assert signal.aborted
    assert isinstance(signal.reason, DurableAttemptTimeoutError)
    with pytest.raises(DurableAttemptTimeoutError):
        signal.raise_if_aborted()
    assert await signal.wait() is signal.reason
    assert cancelled == [True]
    result = await operations.slow.get_result("a")
    assert result.status == "failed"
    assert result.error == SerializedError(
        "DurableAttemptTimeoutError", 'Durable operation "slow" timed out after 1000ms'
    )


async def test_handler_ignoring_cancellation_keeps_permit_and_key_lock() -> None:
    """A timed-out handler that keeps running holds its permit and key until it ends."""
    probe = Probe(attempt_timeout_ms=1000, retries=RetryPolicy(delay=lambda attempt: 0))
    probe.scheduler_options = {"alarm_concurrency": 1}
    ended: list[int] = []

    async def stubborn(call: DurableCall) -> Any:
        if call.attempt == 1:
            deadline = _clock_now() + 10_000
            while _clock_now() < deadline:
                try:
                    await asyncio.sleep((deadline - _clock_now()) / 1000)
                except asyncio.CancelledError:
                    continue
            ended.append(_clock_now())
        return call.attempt

    probe.behaviour["a"] = stubborn
    async with lab(probe) as t:
        await t.obj.register("charge", "a")
        await t.clock.advance(3000)
        await t.obj.register("charge", "b")
        await t.clock.advance(3000)
        assert [call[0] for call in probe.calls] == ["a"]
        await t.clock.advance(4000)
        await t.clock.run_until_idle()
        assert ended == [START_MS + 10_000]
        # The permit freed at T+10s goes to "b", which queued for it first; the retry of
        # "a" was attached to the running attempt and starts in a later pass.
        assert [(c[0], c[1]) for c in probe.calls] == [("a", 1), ("b", 1), ("a", 2)]
        assert all(at >= START_MS + 10_000 for _, _, at in probe.calls[1:])
        assert probe.max_running == 1
        assert (await t.obj.result("charge", "a"))["result"] == 2


async def test_registration_is_durable_when_it_returns(tmp_path: Path) -> None:
    """A crash right after the registration returned keeps the call, which then runs."""
    probe = Probe()
    probe.behaviour["a"] = parked(probe, "a")
    async with lab(probe, tmp_path) as t:
        await t.obj.register("charge", "a", {"n": 1})
        await t.rt.crash(t.obj)
        probe.gate("a").set()
        assert (await t.obj.result("charge", "a"))["status"] == "pending"
        await t.clock.advance(15_000)
        result = await t.obj.result("charge", "a")
        assert result["status"] == "completed"


async def test_duplicate_registration_is_a_silent_no_op() -> None:
    """The same id again stores nothing new, whatever the payload; the handler runs once."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.register("charge", "a", {"n": 1})
        await t.obj.register("charge", "a", {"n": 2})
        await t.clock.run_until_idle()
        await t.obj.register("charge", "a", {"n": 3})
        await t.clock.advance(60_000)
        assert len(probe.calls) == 1
        assert (await t.obj.result("charge", "a"))["result"] == {"id": "a", "payload": {"n": 1}}
        assert sum(isinstance(e, RegisteredEvent) for e in probe.events) == 1


async def test_id_of_another_operation_raises_duplicate_call_error() -> None:
    """Registering or reading an id under another operation raises, and writes nothing."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.register("charge", "a")
        with pytest.raises(
            DuplicateDurableCallError, match='already belongs to operation "charge"'
        ):
            await t.obj.register("refund", "a")
        with pytest.raises(DuplicateDurableCallError):
            await t.obj.result("refund", "a")
        with pytest.raises(DuplicateDurableCallError):
            await t.obj.wait("refund", "a", 10)
        await t.clock.run_until_idle()
        assert len(probe.calls) == 1


async def test_bad_payload_and_id_are_rejected_before_writing() -> None:
    """A non-JSON payload or a bad id raises at the call and stores nothing."""
    probe = Probe()
    async with lab(probe) as t:
        with pytest.raises(ValueError, match="id must be a non-empty string"):
            await t.obj.register("charge", "")
        assert (await t.obj.result("charge", "x"))["status"] == "not_found"
        assert await t.obj.alarm_at() is None


async def test_attempt_is_counted_before_the_handler_runs() -> None:
    """The stored attempt already equals call.attempt inside the handler."""
    probe = Probe()
    stored: list[tuple[int, int]] = []

    async def check(call: DurableCall) -> Any:
        stored.append((call.attempt, await t.obj.attempts_stored("a")))
        if call.attempt == 1:
            raise RuntimeError("again")
        return None

    probe.behaviour["a"] = check
    async with lab(probe) as t:
        await t.obj.register("charge", "a")
        await t.clock.advance(5_000)
        assert stored == [(1, 1), (2, 2)]


async def test_an_interrupted_attempt_runs_again_alone_and_counts_only_then() -> None:
    """An attempt claimed beside others and cut off by eviction is spared (not counted):
    the call runs again alone, as attempt 2; cut off alone too, it is out of attempts and
    fails with the exhausted error, its handler not run a third time."""
    probe = Probe(retries=RetryPolicy(max_attempts=1))
    probe.behaviour["a"] = parked(probe, "never")
    async with lab(probe) as t:
        await t.obj.register("charge", "a")
        await t.clock.run_until_idle()
        await t.rt.evict(t.obj)
        await t.clock.advance(15_000)
        assert [(key, attempt) for key, attempt, _ in probe.calls] == [("a", 1), ("a", 2)]
        await t.rt.evict(t.obj)
        await t.clock.advance(15_000)
        assert len(probe.calls) == 2
        result = await t.obj.result("charge", "a")
        assert (result["status"], result["attempt"]) == ("failed", 2)
        assert result["error"] == {
            "name": "DurableAttemptsExhaustedError",
            "message": 'Durable operation "charge" exhausted its 1 attempts (2 interrupted: '
            "the process stopped or the object was evicted while its handler ran)",
        }
        [terminal] = [e for e in probe.events if isinstance(e, TerminalEvent)]
        assert (terminal.attempt, terminal.reason, terminal.id) == (2, "attempts_exhausted", "a")


async def test_evicted_attempt_reruns_with_next_attempt_from_the_alarm() -> None:
    """After eviction the alarm rebuilds the work: the interrupted call runs as attempt 2."""
    probe = Probe()

    async def parked_once(call: DurableCall) -> Any:
        if call.attempt == 1:
            await probe.gate("never").wait()
        return call.attempt

    probe.behaviour["a"] = parked_once
    async with lab(probe) as t:
        await t.obj.register("charge", "a")
        await t.clock.run_until_idle()
        assert await t.obj.alarm_at() == START_MS + 15_000
        await t.rt.evict(t.obj)
        await t.clock.advance(14_999)
        assert len(probe.calls) == 1
        await t.clock.advance(1)
        assert probe.calls[1] == ("a", 2, START_MS + 15_000)
        assert (await t.obj.result("charge", "a"))["result"] == 2


async def test_job_wait_is_woken_by_settlement_without_time_passing() -> None:
    """wait() returns when the call completes, with no clock movement (no polling)."""
    probe = Probe()
    probe.behaviour["a"] = parked(probe, "a")
    async with lab(probe) as t:
        await t.obj.register("charge", "a")
        waiter = asyncio.ensure_future(t.obj.wait("charge", "a", 60_000))
        await t.clock.advance(5_000)
        assert not waiter.done()
        probe.gate("a").set()
        await t.clock.run_until_idle()
        assert waiter.done()
        assert (await waiter)["result"] == {"released": 1}
        assert t.clock.now_ms() == START_MS + 5_000


async def test_a_woken_wait_returns_the_result_as_stored() -> None:
    """A wait woken by the success returns what a read of the stored row returns (the
    value as JSON stored it), and the stored attempt."""
    probe = Probe()
    gate = probe.gate("a")

    async def behave(call: DurableCall) -> Any:
        await gate.wait()
        return {"released": call.attempt, "items": [1, 2.5, None, "x"], "ok": True}

    probe.behaviour["a"] = behave
    async with lab(probe) as t:
        await t.obj.register("charge", "a")
        waiter = asyncio.ensure_future(t.obj.wait("charge", "a", 60_000))
        await t.clock.run_until_idle()
        assert not waiter.done()
        gate.set()
        await t.clock.run_until_idle()
        woken = await waiter
        assert woken == await t.obj.result("charge", "a")
        assert (woken["status"], woken["attempt"]) == ("completed", 1)
        assert woken["result"] == {"released": 1, "items": [1, 2.5, None, "x"], "ok": True}


async def test_job_wait_times_out_with_the_latest_state() -> None:
    """A wait that times out returns the still-pending state."""
    probe = Probe()
    probe.behaviour["a"] = parked(probe, "a")
    async with lab(probe) as t:
        await t.obj.register("charge", "a")
        waiter = asyncio.ensure_future(t.obj.wait("charge", "a", 1_000))
        await t.clock.advance(999)
        assert not waiter.done()
        await t.clock.advance(1)
        result = await waiter
        assert (result["status"], result["attempt"]) == ("pending", 1)


async def test_job_wait_is_not_woken_by_a_scheduled_retry() -> None:
    """A failed attempt that schedules a retry does not end the wait; the success does."""
    probe = Probe(retries=RetryPolicy(delay=lambda attempt: 10_000))
    probe.behaviour["a"] = failing(1)
    async with lab(probe) as t:
        await t.obj.register("charge", "a")
        waiter = asyncio.ensure_future(t.obj.wait("charge", "a", 60_000))
        await t.clock.advance(9_999)
        assert not waiter.done()
        await t.clock.advance(1)
        await t.clock.run_until_idle()
        assert (await waiter)["status"] == "completed"
        assert t.clock.now_ms() == START_MS + 10_000


async def test_job_wait_returns_at_once_when_settled_missing_or_zero() -> None:
    """wait() does not block for settled or unknown ids or timeout 0; bad timeouts raise."""
    probe = Probe()
    probe.behaviour["p"] = parked(probe, "p")
    async with lab(probe) as t:
        await t.obj.register("charge", "a")
        await t.obj.register("charge", "p")
        await t.clock.run_until_idle()
        assert (await t.obj.wait("charge", "a", 60_000))["status"] == "completed"
        assert (await t.obj.wait("charge", "zz", 60_000))["status"] == "not_found"
        assert (await t.obj.wait("charge", "p", 0))["status"] == "pending"
        with pytest.raises(ValueError, match="timeout_ms must be a non-negative safe integer"):
            await t.obj.wait("charge", "p", -1)


async def test_purge_is_strict_counts_and_frees_ids() -> None:
    """purge_before deletes calls created strictly before the cutoff and returns the count."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.register("charge", "old")
        await t.clock.advance(1_000)
        await t.obj.register("charge", "edge")
        await t.clock.run_until_idle()
        assert await t.obj.purge(START_MS + 1_000) == 1
        assert (await t.obj.result("charge", "old"))["status"] == "not_found"
        assert (await t.obj.result("charge", "edge"))["status"] == "completed"
        await t.obj.register("charge", "old", {"again": True})
        await t.clock.run_until_idle()
        assert (await t.obj.result("charge", "old"))["result"]["payload"] == {"again": True}
        purged = [e for e in probe.events if isinstance(e, PurgedEvent)]
        assert [(e.before, e.count) for e in purged] == [(START_MS + 1_000, 1)]
        with pytest.raises(ValueError, match="before must be a non-negative safe integer"):
            await t.obj.purge(-1)


async def test_purge_aborts_running_handler_and_ignores_its_late_result() -> None:
    """A purged running call gets its signal aborted; its late success cannot touch a new call."""
    probe = Probe()
    probe.behaviour["a"] = parked(probe, "a")
    async with lab(probe) as t:
        await t.obj.register("charge", "a", {"v": 1})
        await t.clock.run_until_idle()
        waiter = asyncio.ensure_future(t.obj.wait("charge", "a", 60_000))
        await t.clock.run_until_idle()
        await t.clock.advance(1)
        assert await t.obj.purge(START_MS + 1) == 1
        await t.clock.run_until_idle()
        assert (await waiter)["status"] == "not_found"
        signal = probe.signals["a"]
        assert signal.aborted and str(signal.reason) == "Durable operation was purged"
        await t.obj.register("charge", "a", {"v": 2})
        await t.clock.run_until_idle()
        assert len(probe.calls) == 2
        probe.gate("a").set()
        await t.clock.run_until_idle()
        result = await t.obj.result("charge", "a")
        assert (result["status"], result["attempt"]) == ("completed", 1)
        settled = [e for e in probe.events if isinstance(e, AttemptSettledEvent)]
        assert len(settled) == 1


async def test_lifecycle_events_follow_the_attempts() -> None:
    """registered, attempt_started, attempt_settled (retry, then completed) in order."""
    probe = Probe(retries=RetryPolicy(delay=lambda attempt: 1000))
    probe.behaviour["a"] = failing(1)
    async with lab(probe) as t:
        await t.obj.register("charge", "a")
        await t.clock.advance(1000)
        kinds = [(type(e).__name__, getattr(e, "outcome", None)) for e in probe.events]
        assert kinds == [
            ("RegisteredEvent", None),
            ("AttemptStartedEvent", None),
            ("AttemptSettledEvent", "retry_scheduled"),
            ("AttemptStartedEvent", None),
            ("AttemptSettledEvent", "completed"),
        ]
        generation = probe.events[0].generation
        assert all(e.generation == generation and e.id == "a" for e in probe.events)
        assert all(e.operation == "charge" for e in probe.events)
        retry = probe.events[2]
        assert (retry.next_attempt_at, retry.error.message, retry.attempt) == (
            START_MS + 1000,
            "boom",
            1,
        )
        done = probe.events[4]
        assert (done.attempt, done.duration_ms, done.result) == (2, 0, None)
        assert isinstance(probe.events[3], AttemptStartedEvent)


async def test_completed_event_carries_result_when_opted_in() -> None:
    """include_result_in_events=True puts the handler's result on the completed event."""
    probe = Probe(include_result_in_events=True)
    async with lab(probe) as t:
        await t.obj.register("charge", "a", 7)
        await t.clock.run_until_idle()
        [done] = [e for e in probe.events if isinstance(e, AttemptSettledEvent)]
        assert done.result == {"id": "a", "payload": 7}


async def test_failing_hook_is_logged_and_changes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """A hook that raises on every event is reported; the call still completes."""
    probe = Probe()
    probe.events = _Exploding()
    async with lab(probe) as t:
        with caplog.at_level(logging.ERROR, logger="durability"):
            await t.obj.register("charge", "a")
            await t.clock.run_until_idle()
        assert (await t.obj.result("charge", "a"))["status"] == "completed"
    failures = [
        r for r in caplog.records if getattr(r, "event", "") == "durability.lifecycle_hook.failed"
    ]
    assert [r.details["lifecycle_type"] for r in failures] == [  # type: ignore[attr-defined]
        "registered",
        "attempt_started",
        "attempt_settled",
    ]


class _Exploding(list[Any]):
    def append(self, item: Any) -> None:
        raise RuntimeError("hook down")


async def test_constructor_rejects_bad_options_before_writing(make_runtime: MakeRuntime) -> None:
    """Bad options raise ValueError/TypeError naming the option."""

    class Bad(DurableObject):
        async def build(self, case: str) -> str:
            scheduler = DurabilityScheduler.of(self.ctx) or DurabilityScheduler(context=self.ctx)
            cases: dict[str, dict[str, Any]] = {
                "timeout": {"attempt_timeout_ms": 0},
                "reserved": {"handlers": {"alarm": print}},
                "method": {"methods": {"x": MethodOptions(attempt_timeout_ms=-1)}},
                "both": {"scheduler": scheduler, "context": self.ctx},
                "neither": {"context": None},
                "shared_option": {"scheduler": scheduler, "alarm_concurrency": 3},
                "private_option": {"context": self.ctx, "alarm_min_delay_ms": 999},
            }
            options = cases[case]
            options.setdefault("handlers", {"x": print})
            if "scheduler" not in options:
                options.setdefault("context", self.ctx)
            try:
                Durability(**options)
            except (TypeError, ValueError) as error:
                tables = (
                    adapt(self.ctx)
                    .storage.sql.exec(
                        "SELECT COUNT(*) AS n FROM sqlite_master WHERE name = 'durability_calls'"
                    )
                    .one()["n"]
                )
                return f"{type(error).__name__}: {error} (tables={tables})"
            return "built"

    async with make_runtime(bindings={"BAD": Bad}) as rt:
        obj = rt.env.BAD.get_by_name("x")
        assert await obj.build("timeout") == (
            "ValueError: attempt_timeout_ms must be a positive integer (tables=0)"
        )
        assert await obj.build("reserved") == (
            'ValueError: "alarm" is reserved by Durability (tables=0)'
        )
        assert await obj.build("method") == (
            "ValueError: methods.x.attempt_timeout_ms must be a positive integer (tables=0)"
        )
        assert (await obj.build("both")).startswith("ValueError: pass either scheduler= or")
        assert (await obj.build("neither")).startswith("TypeError: either scheduler= or context=")
        assert (await obj.build("shared_option")).startswith(
            "ValueError: alarm_concurrency can only be given with context="
        )
        assert await obj.build("private_option") == (
            "ValueError: alarm_min_delay_ms must be between 1000 and 15000 (tables=0)"
        )


INVALID_OPTIONS: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"alarm_concurrency": 0}, ValueError, "alarm_concurrency must be a positive integer"),
    ({"attempt_timeout_ms": 0}, ValueError, "attempt_timeout_ms must be a positive integer"),
    ({"attempt_timeout_ms": "5"}, TypeError, "attempt_timeout_ms"),
    ({"retries": 5}, TypeError, "retries"),
    (
        {"methods": {"run": MethodOptions(attempt_timeout_ms=0)}},
        ValueError,
        "methods.run.attempt_timeout_ms must be a positive integer",
    ),
    ({"methods": {"run": {}}}, TypeError, "methods.run"),
    ({"on_lifecycle_event": 1}, TypeError, "on_lifecycle_event must be callable"),
    ({"include_result_in_events": 1}, TypeError, "include_result_in_events"),
    ({"handlers": {"charge": 1}}, TypeError, "handlers.charge must be callable"),
]


@pytest.mark.parametrize(
    ("options", "error", "message"),
    INVALID_OPTIONS,
    ids=[sorted(options)[-1] for options, _, _ in INVALID_OPTIONS],
)
async def test_invalid_option_raises_and_writes_nothing(
    live: LiveObject, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    """A bad option raises at construction with a message naming it, and writes nothing."""
    with pytest.raises(error, match=re.escape(message)):
        Durability(context=live.ctx, **{"handlers": {"run": noop}, **options})
    assert live.tables() == []


async def test_second_durability_on_one_scheduler_is_rejected(make_runtime: MakeRuntime) -> None:
    """One Durability per scheduler: a second raises ValueError 'already attached'."""

    class Twice(DurableObject):
        async def build(self) -> str:
            scheduler = DurabilityScheduler(context=self.ctx)
            Durability(scheduler=scheduler, handlers={"x": print})
            try:
                Durability(scheduler=scheduler, handlers={"y": print})
            except ValueError as error:
                return str(error)
            return "built"

    async with make_runtime(bindings={"TWICE": Twice}) as rt:
        message = await rt.env.TWICE.get_by_name("x").build()
        assert message == "A Durability helper is already attached to this scheduler"


async def test_operation_objects_are_shared_and_names_checked() -> None:
    """Attribute access and operation(name) give one object; unknown names raise."""
    async with lab(Probe()) as t:
        assert await t.obj.names() == [True, "ValueError", "AttributeError"]


async def test_migrate_classmethod_reverts_and_reapplies_the_schema(
    make_runtime: MakeRuntime,
) -> None:
    """Durability.migrate(ctx, None) drops the calls table; LATEST brings it back."""

    class Migrating(DurableObject):
        async def cycle(self) -> list[Any]:
            Durability(context=self.ctx, handlers={"x": print})
            down = Durability.migrate(self.ctx, target=None)
            gone = (
                adapt(self.ctx)
                .storage.sql.exec(
                    "SELECT COUNT(*) AS n FROM sqlite_master WHERE name = 'durability_calls'"
                )
                .one()["n"]
            )
            up = Durability.migrate(self.ctx)
            return [list(down.rolled_back), gone, list(up.applied)]

    async with make_runtime(bindings={"MIG": Migrating}) as rt:
        rolled_back, gone, applied = await rt.env.MIG.get_by_name("m").cycle()
        assert gone == 0
        assert rolled_back == list(reversed(applied))
        assert applied[0] == "durability_0001_create_calls"
