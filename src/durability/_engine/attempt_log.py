"""Log records for settled attempts, on ``durability.operations`` and ``durability.alarms``.

A failed attempt that will be retried logs at WARNING and a terminal failure at ERROR,
both with the error's traceback; an attempt whose handler raised `RetryAfter` (it asked
to run later, nothing went wrong) logs at INFO without one; a completed attempt logs at
DEBUG only. Every record
carries its facts in `extra` (attribute names on the `LogRecord`) so a structured
formatter can use them: `event`, `entity_kind`, `operation` or `alarm`, `record_id`,
`generation`, `attempt`, `max_attempts`, `object_id` and `object_name` (each `None`
when unknown), plus `error_name`, `error_message`, `retry_in_ms`, `next_attempt_at`,
`reason` or `duration_ms` as the outcome has them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from .._errors import RetryAfter, SerializedError, is_non_retryable

if TYPE_CHECKING:
    from .attempt import Attempt, AttemptKind
    from .engine import Engine

OPERATIONS = logging.getLogger("durability.operations")
ALARMS = logging.getLogger("durability.alarms")

TerminalReason: TypeAlias = Literal[
    "non_retryable", "attempts_exhausted", "terminal_error", "retry_policy"
]


def terminal_reason(
    attempt: Attempt, number: int, raised: BaseException, stored: BaseException
) -> TerminalReason:
    """Why a failed attempt ended its record (`stored` differs when the policy failed)."""
    if stored is not raised:
        return "retry_policy"
    if is_non_retryable(raised):
        return "non_retryable"
    if number - attempt.spared >= attempt.kind.policy.max_attempts:
        return "attempts_exhausted"
    return "terminal_error"


def attempt_failed(
    engine: Engine,
    attempt: Attempt,
    number: int,
    error: BaseException,
    stored: SerializedError,
    *,
    retry_in_ms: int,
    next_attempt_at: int,
) -> None:
    """WARNING: the attempt failed and the record is due again in `retry_in_ms` (INFO
    and no traceback when the handler asked for that with `RetryAfter`)."""
    fields = _fields(engine, attempt, number, "attempt_failed")
    fields.update(
        error_name=stored.name,
        error_message=stored.message,
        retry_in_ms=retry_in_ms,
        next_attempt_at=next_attempt_at,
    )
    requested = isinstance(error, RetryAfter)
    _logger(attempt).log(
        logging.INFO if requested else logging.WARNING,
        "%s attempt %d of %d failed%s: %s: %s; next attempt in %d ms",
        _subject(attempt),
        number,
        attempt.kind.policy.max_attempts,
        _on_object(fields),
        stored.name,
        stored.message,
        retry_in_ms,
        exc_info=None if requested else error,
        extra=fields,
    )


def record_failed(
    engine: Engine,
    attempt: Attempt,
    number: int,
    error: BaseException | None,
    stored: SerializedError,
    reason: TerminalReason,
) -> None:
    """ERROR: the record failed for good (`error` is `None` when no attempt ran)."""
    fields = _fields(engine, attempt, number, "failed")
    fields.update(error_name=stored.name, error_message=stored.message, reason=reason)
    _logger(attempt).error(
        "%s failed for good at attempt %d of %d (%s)%s: %s: %s",
        _subject(attempt),
        number,
        attempt.kind.policy.max_attempts,
        reason.replace("_", " "),
        _on_object(fields),
        stored.name,
        stored.message,
        exc_info=error,
        extra=fields,
    )


def logs_successes(kind: AttemptKind) -> bool:
    """Whether successes of `kind` are logged now (DEBUG is enabled on its logger)."""
    return _kind_logger(kind).isEnabledFor(logging.DEBUG)


def attempt_completed(engine: Engine, attempt: Attempt, number: int, duration_ms: int) -> None:
    """DEBUG: the attempt's success was persisted."""
    logger = _logger(attempt)
    if not logger.isEnabledFor(logging.DEBUG):
        return
    fields = _fields(engine, attempt, number, "completed")
    fields["duration_ms"] = duration_ms
    logger.debug(
        "%s attempt %d completed in %d ms%s",
        _subject(attempt),
        number,
        duration_ms,
        _on_object(fields),
        extra=fields,
    )


def outcome_discarded(engine: Engine, attempt: Attempt, number: int) -> None:
    """DEBUG: a newer generation or a purge won, so this attempt's outcome was dropped."""
    logger = _logger(attempt)
    if not logger.isEnabledFor(logging.DEBUG):
        return
    fields = _fields(engine, attempt, number, "outcome_discarded")
    logger.debug(
        "%s attempt %d ended after its record moved on; its outcome is dropped%s",
        _subject(attempt),
        number,
        _on_object(fields),
        extra=fields,
    )


def _logger(attempt: Attempt) -> logging.Logger:
    return _kind_logger(attempt.kind)


def _kind_logger(kind: AttemptKind) -> logging.Logger:
    return OPERATIONS if kind.entity_kind == "operation" else ALARMS


def _subject(attempt: Attempt) -> str:
    if attempt.kind.entity_kind == "operation":
        return f'operation "{attempt.kind.name}" id "{attempt.key}"'
    return f'named alarm "{attempt.kind.name}"'


def _fields(engine: Engine, attempt: Attempt, number: int, event: str) -> dict[str, Any]:
    object_id = getattr(engine.context, "id", None)
    name = getattr(object_id, "name", None)
    fields: dict[str, Any] = {
        "event": f"durability.{attempt.kind.entity_kind}.{event}",
        "entity_kind": attempt.kind.entity_kind,
        "operation": attempt.kind.name if attempt.kind.entity_kind == "operation" else None,
        "alarm": attempt.kind.name if attempt.kind.entity_kind == "named_alarm" else None,
        "record_id": attempt.key,
        "generation": attempt.generation,
        "attempt": number,
        "max_attempts": attempt.kind.policy.max_attempts,
        "object_id": None if object_id is None else str(object_id),
        "object_name": name if isinstance(name, str) else None,
    }
    return fields


def _on_object(fields: dict[str, Any]) -> str:
    """`` on object "name" (id)`` with what is known of the object, or nothing."""
    name, object_id = fields["object_name"], fields["object_id"]
    if name is not None:
        return f' on object "{name}" ({object_id})'
    if object_id is not None:
        return f" on object {object_id}"
    return ""
