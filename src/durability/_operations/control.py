"""The checks and writes that control one operation record: its id, when it first runs,
completion, cancel and retry.

Each write is a single compare-and-set on the record's status, run inside the engine's
transaction by the caller so the alarm is reconciled with it. Cancelling or retrying
also moves the record to a new generation or status that a running attempt's fenced
settlement can no longer match, which is how a late outcome is ignored.
"""

from __future__ import annotations

from typing import Any

from .._clock import now_ms
from .._context import Row, SqlStorage
from .._engine import forget_stack
from .._errors import DuplicateDurableCallError, DurableResultSerializationError, SerializedError
from .._serialization import serialize
from .._types import MAX_SAFE_INTEGER
from .._validate import check_non_negative_int, check_utf8, to_epoch_ms
from .records import CALLS

NULL_TEXT = serialize(None)
"""The stored envelope of `None`, the most common payload and result."""


def check_id(id: object) -> str:
    """`id` as a call id: a non-empty `str` (`TypeError` / `ValueError` otherwise)."""
    if not isinstance(id, str):
        raise TypeError(f"id must be a string, got {type(id).__name__}")
    if not id:
        raise ValueError("id must be a non-empty string")
    return id if id.isascii() else check_utf8("id", id)


def first_attempt_at(now: int, run_at: object, delay_ms: object) -> int:
    """When a new record's first attempt is due: `run_at`, `now + delay_ms`, or `now`."""
    if run_at is not None and delay_ms is not None:
        raise ValueError("run_at and delay_ms cannot both be given")
    if run_at is not None:
        return to_epoch_ms("run_at", run_at)
    if delay_ms is None:
        return now
    due = now + check_non_negative_int("delay_ms", delay_ms)
    if due > MAX_SAFE_INTEGER:
        raise ValueError("delay_ms must keep the due time a safe integer")
    return due


def cancel_call(
    sql: SqlStorage, operation: str, key: str, now: int, error: SerializedError
) -> Row | None:
    """Make pending record `key` cancelled; its generation and attempt, or `None` when it
    is missing or already terminal (`DuplicateDurableCallError` if it is another's)."""
    rows = sql.exec(
        "UPDATE durability_calls SET status = 'cancelled', completed_at = ?, last_error = ?, "
        "last_error_name = ? WHERE id = ? AND operation = ? AND status = 'pending' "
        "RETURNING generation_id, attempt",
        now,
        error.message,
        error.name,
        key,
        operation,
    ).to_list()
    return _changed(sql, rows, operation, key)


def retry_call(sql: SqlStorage, operation: str, key: str, now: int, generation: str) -> Row | None:
    """Make failed or cancelled record `key` pending again, due now, as `generation` with
    no attempts; its stored payload and creation time, or `None`."""
    rows = sql.exec(
        "UPDATE durability_calls SET status = 'pending', result = NULL, attempt = 0, "
        "next_attempt_at = ?, last_error = NULL, last_error_name = NULL, completed_at = NULL, "
        "generation_id = ?, claim_alone = NULL, interruptions = 0, spared = 0 "
        "WHERE id = ? AND operation = ? AND status IN ('failed', 'cancelled') "
        "RETURNING payload, created_at",
        now,
        generation,
        key,
        operation,
    ).to_list()
    return _changed(sql, rows, operation, key)


def complete_call(
    sql: SqlStorage, operation: str, key: str, generation: str, result: Any, attempt: int
) -> int | None:
    """Store `result` on record `key` if `attempt` of `generation` still holds it; the
    completion time, or `None` when a cancel, retry or purge got there first.

    `DurableResultSerializationError` when the result is not JSON: nothing is stored.
    """
    try:
        text = NULL_TEXT if result is None else serialize(result, "result")
    except (TypeError, ValueError) as error:
        raise DurableResultSerializationError(operation) from error
    completed_at = now_ms()
    won = sql.exec(
        "UPDATE durability_calls SET status = 'completed', result = ?, completed_at = ? "
        "WHERE id = ? AND generation_id = ? AND status = 'pending' AND attempt = ?",
        text,
        completed_at,
        key,
        generation,
        attempt,
    ).rows_written
    return completed_at if won else None


def _changed(sql: SqlStorage, rows: list[Row], operation: str, key: str) -> Row | None:
    """The one row an update of record `key` returned (its stored stack trace is dropped),
    or `None` when nothing matched (`DuplicateDurableCallError` if it is another's)."""
    if rows:
        forget_stack(sql, CALLS, key)
        return rows[0]
    _check_owner(sql, operation, key)
    return None


def _check_owner(sql: SqlStorage, operation: str, key: str) -> None:
    stored = sql.exec("SELECT operation FROM durability_calls WHERE id = ?", key).to_list()
    if stored and stored[0]["operation"] != operation:
        raise DuplicateDurableCallError(key, str(stored[0]["operation"]), operation)
