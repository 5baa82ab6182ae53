"""The durable outcome of an attempt: what a failure becomes, and the fenced writes,
log records and lifecycle events of a success, a failure and an exhausted record.

`decide_retry` applies the retry rules in a fixed order, with `retry_at` the policy's
delay (the fanout's retries use it too); `settle_error` persists what it decides.
Every write names the record's generation and attempt, so an outcome that arrives
after its record moved on (cancelled, retried, purged) is dropped silently.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._clock import now_ms
from .._context import SqlStorage
from .._errors import DurableRetryPolicyError, RetryAfter, is_non_retryable, serialize_error
from .._frozen import frozen_with
from .._types import MAX_SAFE_INTEGER
from . import attempt_log
from .attempt import Attempt, Done
from .lifecycle import AttemptSettledEvent, LifecycleEventType, TerminalEvent
from .policy import AttemptPolicy
from .tables import exhaust_attempts, settle_failure

if TYPE_CHECKING:
    from .engine import Engine
    from .records import RecordExecutor


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """What a failed attempt becomes: the error to store, terminal or not, and when next."""

    error: BaseException
    terminal: bool
    timestamp: int
    next_attempt_at: int


def decide_retry(attempt: Attempt, number: int, error: BaseException) -> RetryDecision:
    """Apply the retry rules in order: non-retryable (by class, name or the policy's
    `non_retryable`), attempt limit (the attempts that count: not `spared`), the
    executor's own rule, then the delay a `RetryAfter` asked for or else the policy's."""
    kind = attempt.kind
    policy = kind.policy
    if (
        is_non_retryable(error)
        or isinstance(error, policy.non_retryable)
        or number - attempt.spared >= policy.max_attempts
        or _record_executor(attempt).is_terminal(error, policy)
    ):
        timestamp = now_ms()
        return RetryDecision(error, True, timestamp, timestamp)
    requested = error.delay_ms if isinstance(error, RetryAfter) else None
    try:
        timestamp, next_attempt_at = retry_at(policy, number, kind.label, requested)
    except DurableRetryPolicyError as policy_error:
        timestamp = now_ms()
        return RetryDecision(policy_error, True, timestamp, timestamp)
    return RetryDecision(error, False, timestamp, next_attempt_at)


def retry_at(
    policy: AttemptPolicy, number: int, label: str, requested: object = None
) -> tuple[int, int]:
    """`(now, when the next attempt is due)` after attempt `number` failed: `requested`
    ms later when given (a `RetryAfter`, a fanout consumer's `retry(delay_ms)`), else
    after the policy's delay. `DurableRetryPolicyError(label)` (the policy's own error
    as its cause) when that is not a finite non-negative safe-integer time."""
    try:
        raw = policy.delay(number) if requested is None else requested
    except Exception as policy_error:
        raise DurableRetryPolicyError(label) from policy_error
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
        raise DurableRetryPolicyError(label)
    delay = math.floor(raw + 0.5)
    timestamp = now_ms()
    if raw < 0 or delay > MAX_SAFE_INTEGER or timestamp + delay > MAX_SAFE_INTEGER:
        raise DurableRetryPolicyError(label)
    return timestamp, timestamp + delay


def record_success(
    engine: Engine,
    attempt: Attempt,
    number: int,
    started_at: int,
    completed_at: int | None,
    result: Any,
) -> None:
    """After a success was written (`completed_at`, or `None` when a newer generation won):
    log it, wake the record's watchers and emit."""
    record_successes(engine, [(attempt, number, result)], [completed_at], started_at)


def record_successes(
    engine: Engine, done: Sequence[Done], written: Sequence[int | None], started_at: int
) -> None:
    """`record_success` for the attempts of one batch (of one table), whose successes
    were written together: each of `done` with its `completed_at` in `written`. What
    every row shares (the log level, the table's watchers) is looked up once."""
    if not done:
        return
    first = done[0][0].kind
    debug = attempt_log.logs_successes(first)
    table = first.table.name
    watchers = engine.watchers
    watched = watchers.watched_keys(table)
    if (
        not debug
        and not watched
        and LifecycleEventType.ATTEMPT_SETTLED not in first.listened
        and None not in written
    ):
        return  # nothing to log, wake or emit (a table's kinds share one hook's events)
    last_kind = None
    announce = False
    for (attempt, number, result), completed_at in zip(done, written, strict=True):
        if completed_at is None:
            attempt_log.outcome_discarded(engine, attempt, number)
            continue
        duration = completed_at - started_at
        if duration < 0:
            duration = 0
        if debug:
            attempt_log.attempt_completed(engine, attempt, number, duration)
        if watched and attempt.key in watched:
            watchers.notify(
                table,
                attempt.key,
                {
                    "generation_id": attempt.generation,
                    "created_at": attempt.created_at,
                    "attempt": number,
                    "result": result,
                },
            )
        kind = attempt.kind
        if kind is not last_kind:  # looked up once per run of a kind
            last_kind = kind
            announce = LifecycleEventType.ATTEMPT_SETTLED in kind.listened
        if announce:
            kind.emit(_settled_event(attempt, completed_at, number, duration, result))


def _settled_event(
    attempt: Attempt, timestamp: int, number: int, duration_ms: int, result: Any
) -> AttemptSettledEvent:
    """The ``completed`` `AttemptSettledEvent` of `attempt`, every init field named as
    the class declares it (`frozen_with` says why not through its constructor)."""
    kind = attempt.kind
    is_operation = kind.entity_kind == "operation"
    return frozen_with(
        AttemptSettledEvent,
        {
            "entity_kind": kind.entity_kind,
            "operation": kind.name if is_operation else None,
            "alarm": None if is_operation else kind.name,
            "id": attempt.key,
            "generation": attempt.generation,
            "timestamp": timestamp,
            "attempt": number,
            "outcome": "completed",
            "duration_ms": duration_ms,
            "error": None,
            "next_attempt_at": None,
            "result": result if kind.include_result else None,
        },
    )


async def fail_exhausted(engine: Engine, attempt: Attempt) -> None:
    """Fail a record whose claim lost because it is at its attempt limit (if it still is)."""
    kind = attempt.kind
    # A suspect out of attempts was interrupted once more than its row counts so far.
    interruptions = attempt.interruptions + (attempt.suspect is not None)
    assert kind.exhausted_error is not None  # a record always has an attempt limit
    exhausted = kind.exhausted_error(attempt, interruptions)

    def write(sql: SqlStorage) -> int | None:
        stored = exhaust_attempts(
            sql,
            kind.table,
            attempt.key,
            attempt.generation,
            kind.policy.max_attempts,
            exhausted,
        )
        if stored is not None:
            _record_executor(attempt).on_terminal(sql, attempt)
        return stored

    number = await engine.transaction(write)
    if number is None:
        return
    attempt_log.record_failed(engine, attempt, number, None, exhausted, "attempts_exhausted")
    engine.watchers.notify(kind.table.name, attempt.key)
    if LifecycleEventType.TERMINAL in kind.listened:
        kind.emit(
            TerminalEvent(**attempt.entity(), timestamp=now_ms(), attempt=number, error=exhausted)
        )


async def settle_error(
    engine: Engine, attempt: Attempt, number: int, started_at: int, error: BaseException
) -> None:
    """Persist a failed attempt (retry or terminal, per `decide_retry`), then log and emit."""
    decision = decide_retry(attempt, number, error)
    stored = serialize_error(decision.error)
    kind = attempt.kind

    def write(sql: SqlStorage) -> bool:
        owned = settle_failure(
            sql,
            kind.table,
            attempt.key,
            attempt.generation,
            number,
            terminal=decision.terminal,
            next_attempt_at=decision.next_attempt_at,
            error=stored,
        )
        if owned and decision.terminal:
            _record_executor(attempt).on_terminal(sql, attempt)
        return owned

    owned = await engine.transaction(write)
    if not owned:
        attempt_log.outcome_discarded(engine, attempt, number)
        return
    if decision.terminal:
        reason = attempt_log.terminal_reason(attempt, number, error, decision.error)
        attempt_log.record_failed(engine, attempt, number, decision.error, stored, reason)
        engine.watchers.notify(kind.table.name, attempt.key)
    else:
        attempt_log.attempt_failed(
            engine,
            attempt,
            number,
            decision.error,
            stored,
            retry_in_ms=decision.next_attempt_at - decision.timestamp,
            next_attempt_at=decision.next_attempt_at,
        )
    if LifecycleEventType.ATTEMPT_SETTLED not in kind.listened:
        return
    kind.emit(
        AttemptSettledEvent(
            **attempt.entity(),
            timestamp=decision.timestamp,
            attempt=number,
            outcome="failed" if decision.terminal else "retry_scheduled",
            duration_ms=max(0, decision.timestamp - started_at),
            error=stored,
            next_attempt_at=None if decision.terminal else decision.next_attempt_at,
        )
    )


def _record_executor(attempt: Attempt) -> RecordExecutor:
    """The executor of a record's attempt (settlement only ever sees records)."""
    executor: RecordExecutor = attempt.kind.executor  # type: ignore[assignment]
    return executor
