"""One attempt of a record, from claim to persisted outcome (operations and named alarms).

The order is what makes it crash-safe: the key is marked running before waiting for a
permit, the attempt is counted durably before the handler runs (so interrupted attempts
count), and every later write is a generation-fenced compare-and-set (so a stale
execution loses silently). A timed-out handler is aborted and cancelled, but its permit
and key lock are held until its task really ends, so a retry in this instance can never
overlap it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable
from typing import Any

from .._clock import now_ms
from .._context import SqlStorage
from .._errors import serialize_error
from .._signal import AbortSignal, abort
from . import attempt_log
from .engine import Engine
from .lifecycle import (
    AttemptSettledEvent,
    AttemptStartedEvent,
    LifecycleEventType,
    TerminalEvent,
    slot_constructor,
)
from .permits import Release
from .registry import ActiveExecution
from .spec import ExecutionSpec, decide_retry
from .tables import claim_attempt, exhaust_attempts, is_exhausted, settle_failure


class _Gate:
    """Releases the permit and the key lock once the outcome is persisted AND the handler ended."""

    __slots__ = (
        "engine",
        "entry",
        "handler",
        "outcome",
        "permit",
        "persisted",
        "released",
        "spec",
    )

    def __init__(
        self, engine: Engine, spec: ExecutionSpec, entry: ActiveExecution, permit: Release | None
    ) -> None:
        self.engine = engine
        self.spec = spec
        self.entry = entry
        self.permit = permit
        self.handler: asyncio.Task[None] | None = None
        self.outcome: asyncio.Future[_Outcome] = asyncio.get_running_loop().create_future()
        self.persisted = False
        self.released = False

    def handler_done(self, task: asyncio.Task[None]) -> None:
        # A handler task that ended without reporting (cancelled before it ran) still
        # wakes its execution.
        if not self.outcome.done():
            error = None if task.cancelled() else task.exception()
            _deliver(self.outcome, _Outcome(error=error or asyncio.CancelledError()))
        # Released only now, after its outcome was persisted (a timed-out handler that
        # took a while to end): the reconciles since skipped its key, so time it again.
        self.release_if_settled(refresh=True)

    def execution_done(self) -> None:
        self.persisted = True
        self.release_if_settled(refresh=self.engine.options.live_timers)

    def release_if_settled(self, refresh: bool) -> None:
        if self.released or not self.persisted:
            return
        if self.handler is not None and not self.handler.done():
            return
        self.released = True
        if self.permit is not None:
            self.permit()
        engine, spec = self.engine, self.spec
        engine.running.finish(spec.table.name, spec.key, self.entry)
        if refresh:
            # The key is eligible for the timer again: re-arm it for work it skipped.
            engine.refresh_in_background(
                "durability.scheduler.refresh_failed",
                {"table": spec.table.name, "key": spec.key},
            )


def run_execution(
    engine: Engine, spec: ExecutionSpec, permit: Release | None = None
) -> Awaitable[None]:
    """Mark the key running now; the awaitable claims and runs one attempt.

    It ends when the outcome is persisted (not when a timed-out handler ends) and raises
    only for storage failures. `permit`, if given, is owned by the execution.
    """
    entry = engine.running.start(spec.table.name, spec.key, spec.generation, spec.created_at)
    return _execute(engine, spec, _Gate(engine, spec, entry, permit))


async def _execute(engine: Engine, spec: ExecutionSpec, gate: _Gate) -> None:
    """Claim an attempt, run the handler, settle the outcome; then release the gate."""
    try:
        if spec.after is not None:
            await spec.after.wait()
        if gate.permit is None:
            gate.permit = engine.permits.try_acquire() or await engine.permits.acquire()
        started_at = now_ms()
        attempt = await _claim(engine, spec, started_at)
        if attempt is None:
            return
        signal = AbortSignal()
        gate.entry.signal = signal
        # A host may commit off the loop: wait, so a handler that takes the process down
        # has its attempt counted all the same.
        await engine.storage.sync()
        ended = await _run(engine, spec, gate, attempt, signal, _NOT_CALLED)
        await _settle(engine, spec, attempt, started_at, ended)
    finally:
        gate.execution_done()


async def continue_attempt(
    engine: Engine,
    spec: ExecutionSpec,
    entry: ActiveExecution,
    permit: Release,
    attempt: int,
    started_at: int,
    called: Awaitable[Any],
) -> None:
    """The rest of a claimed attempt whose handler, already called, returned `called`:
    await it in its own task (timed, cancellable), settle the outcome, release the gate.

    `entry.signal` is the signal the handler was called with.
    """
    gate = _Gate(engine, spec, entry, permit)
    try:
        assert entry.signal is not None
        ended = await _run(engine, spec, gate, attempt, entry.signal, called)
        await _settle(engine, spec, attempt, started_at, ended)
    finally:
        gate.execution_done()


async def _claim(engine: Engine, spec: ExecutionSpec, started_at: int) -> int | None:
    """Durably count the attempt (`None` if the row moved on; at its limit it fails)."""
    max_attempts = spec.policy.max_attempts
    attempt = None
    if spec.attempt < max_attempts:
        attempt = claim_attempt(
            engine.sql, spec.table, spec.key, spec.generation, spec.attempt, started_at
        )
    if attempt is None:
        if is_exhausted(engine.sql, spec.table, spec.key, spec.generation, max_attempts):
            await fail_exhausted(engine, spec)
        return None
    if LifecycleEventType.ATTEMPT_STARTED in spec.listened:
        spec.emit(AttemptStartedEvent(**spec.entity(), timestamp=started_at, attempt=attempt))
    return attempt


async def _run(
    engine: Engine,
    spec: ExecutionSpec,
    gate: _Gate,
    attempt: int,
    signal: AbortSignal,
    called: object,
) -> _Outcome:
    """Run the handler in its own task until it ends or times out (then it is aborted)."""
    handler = engine.tasks.spawn(_invoke(spec, attempt, signal, gate.outcome, called))
    gate.handler = handler
    handler.add_done_callback(gate.handler_done)
    try:
        ended = await gate.outcome
    except asyncio.CancelledError:
        handler.cancel()
        raise
    if ended is not _TIMED_OUT:
        return ended
    timeout_error = spec.timeout_error()
    abort(signal, timeout_error)
    handler.cancel()
    return _Outcome(error=timeout_error)


async def _settle(
    engine: Engine, spec: ExecutionSpec, attempt: int, started_at: int, ended: _Outcome
) -> None:
    """Persist the outcome with a fenced write, then wake watchers and emit."""
    if ended.error is not None:
        await settle_error(engine, spec, attempt, started_at, ended.error)
        return
    result = ended.value
    try:
        completed_at = spec.complete(engine.sql, result, attempt)
    except Exception as error:
        await settle_error(engine, spec, attempt, started_at, error)
        return
    record_success(engine, spec, attempt, started_at, completed_at, result)


def record_success(
    engine: Engine,
    spec: ExecutionSpec,
    attempt: int,
    started_at: int,
    completed_at: int | None,
    result: Any,
) -> None:
    """After a success was written (`completed_at`, or `None` when a newer generation won):
    log it, wake the record's watchers and emit."""
    if completed_at is None:
        attempt_log.outcome_discarded(engine, spec, attempt)
        return
    duration = max(0, completed_at - started_at)
    attempt_log.attempt_completed(engine, spec, attempt, duration)
    if engine.watchers.watched(spec.table.name, spec.key):
        engine.watchers.notify(
            spec.table.name,
            spec.key,
            {"generation_id": spec.generation, "created_at": spec.created_at},
        )
    if LifecycleEventType.ATTEMPT_SETTLED not in spec.listened:
        return
    is_operation = spec.entity_kind == "operation"
    spec.emit(
        _settled_event(
            spec.entity_kind,
            spec.name if is_operation else None,
            None if is_operation else spec.name,
            spec.key,
            spec.generation,
            completed_at,
            attempt,
            "completed",
            duration,
            None,
            None,
            result if spec.include_result else None,
        )
    )


_settled_event = slot_constructor(
    AttemptSettledEvent,
    "entity_kind",
    "operation",
    "alarm",
    "id",
    "generation",
    "timestamp",
    "attempt",
    "outcome",
    "duration_ms",
    "error",
    "next_attempt_at",
    "result",
)
"""`AttemptSettledEvent(...)` with every init field given, in this order (checked at
import). Tests that patch `AttemptSettledEvent` here must patch this too."""


class _Outcome:
    """How a handler call ended; a raise is captured so the host never logs it as lost."""

    __slots__ = ("error", "value")

    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self.value = value
        self.error = error


_TIMED_OUT = _Outcome()
"""The outcome the attempt timer delivers when it fires first."""


_NOT_CALLED = object()
"""`called` of an attempt whose handler is still to be called (in the handler's task)."""


async def _invoke(
    spec: ExecutionSpec,
    attempt: int,
    signal: AbortSignal,
    outcome: asyncio.Future[_Outcome],
    called: object,
) -> None:
    """Run the handler in its own task and hand its outcome straight to the execution.

    `called` is what the handler returned when it was called before this task (a batch
    calls it at once): only that is awaited here. A synchronous handler needs no timer;
    an awaitable one is timed from its first await.
    """
    timer: asyncio.TimerHandle | None = None
    try:
        value = spec.invoke(attempt, signal) if called is _NOT_CALLED else called
        if value is not None and inspect.isawaitable(value):
            timer = asyncio.get_running_loop().call_later(
                spec.policy.attempt_timeout_ms / 1000, _expire, outcome
            )
            value = await value
    except asyncio.CancelledError:
        _deliver(outcome, _Outcome(error=asyncio.CancelledError()))
        raise
    except Exception as error:
        _deliver(outcome, _Outcome(error=error))
    else:
        _deliver(outcome, _Outcome(value))
    finally:
        if timer is not None:
            timer.cancel()


def _deliver(outcome: asyncio.Future[_Outcome], ended: _Outcome) -> None:
    if not outcome.done():
        outcome.set_result(ended)


def _expire(outcome: asyncio.Future[_Outcome]) -> None:
    _deliver(outcome, _TIMED_OUT)


async def fail_exhausted(engine: Engine, spec: ExecutionSpec) -> None:
    """Fail a record whose claim lost because it is at its attempt limit (if it still is)."""
    exhausted = serialize_error(spec.exhausted_error())

    def write(sql: SqlStorage) -> int | None:
        stored = exhaust_attempts(
            sql, spec.table, spec.key, spec.generation, spec.policy.max_attempts, exhausted
        )
        if stored is not None and spec.on_terminal is not None:
            spec.on_terminal(sql)
        return stored

    attempt = await engine.transaction(write)
    if attempt is None:
        return
    attempt_log.record_failed(engine, spec, attempt, None, exhausted, "attempts_exhausted")
    engine.watchers.notify(spec.table.name, spec.key)
    if LifecycleEventType.TERMINAL in spec.listened:
        spec.emit(
            TerminalEvent(**spec.entity(), timestamp=now_ms(), attempt=attempt, error=exhausted)
        )


async def settle_error(
    engine: Engine, spec: ExecutionSpec, attempt: int, started_at: int, error: BaseException
) -> None:
    """Persist a failed attempt (retry or terminal, per `decide_retry`), then log and emit."""
    decision = decide_retry(spec, attempt, error)
    stored = serialize_error(decision.error)

    def write(sql: SqlStorage) -> bool:
        owned = settle_failure(
            sql,
            spec.table,
            spec.key,
            spec.generation,
            attempt,
            terminal=decision.terminal,
            next_attempt_at=decision.next_attempt_at,
            error=stored,
        )
        if owned and decision.terminal and spec.on_terminal is not None:
            spec.on_terminal(sql)
        return owned

    owned = await engine.transaction(write)
    if not owned:
        attempt_log.outcome_discarded(engine, spec, attempt)
        return
    if decision.terminal:
        reason = attempt_log.terminal_reason(spec, attempt, error, decision.error)
        attempt_log.record_failed(engine, spec, attempt, decision.error, stored, reason)
        engine.watchers.notify(spec.table.name, spec.key)
    else:
        attempt_log.attempt_failed(
            engine,
            spec,
            attempt,
            decision.error,
            stored,
            retry_in_ms=decision.next_attempt_at - decision.timestamp,
            next_attempt_at=decision.next_attempt_at,
        )
    if LifecycleEventType.ATTEMPT_SETTLED not in spec.listened:
        return
    spec.emit(
        AttemptSettledEvent(
            **spec.entity(),
            timestamp=decision.timestamp,
            attempt=attempt,
            outcome="failed" if decision.terminal else "retry_scheduled",
            duration_ms=max(0, decision.timestamp - started_at),
            error=stored,
            next_attempt_at=None if decision.terminal else decision.next_attempt_at,
        )
    )
