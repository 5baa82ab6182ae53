"""The checks and writes that control one operation record: its id, when it first runs,
cancel and retry.

Each write is a single compare-and-set on the record's status, run inside the engine's
transaction by the caller so the alarm is reconciled with it. Cancelling or retrying
also moves the record to a new generation or status that a running attempt's fenced
settlement can no longer match, which is how a late outcome is ignored.
"""

from __future__ import annotations

from ._context import Row, SqlStorage
from ._engine import forget_stack
from ._errors import DuplicateDurableCallError, SerializedError
from ._operation_records import CALLS
from ._types import MAX_SAFE_INTEGER
from ._validate import check_non_negative_int, to_epoch_ms


def check_id(id: object) -> str:
    """`id` as a call id: a non-empty `str` (`TypeError` / `ValueError` otherwise)."""
    if not isinstance(id, str):
        raise TypeError(f"id must be a string, got {type(id).__name__}")
    if not id:
        raise ValueError("id must be a non-empty string")
    return id


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
    if rows:
        forget_stack(sql, CALLS, key)
        return rows[0]
    _check_owner(sql, operation, key)
    return None


def retry_call(sql: SqlStorage, operation: str, key: str, now: int, generation: str) -> Row | None:
    """Make failed or cancelled record `key` pending again, due now, as `generation` with
    no attempts; its stored payload and creation time, or `None`."""
    rows = sql.exec(
        "UPDATE durability_calls SET status = 'pending', result = NULL, attempt = 0, "
        "next_attempt_at = ?, last_error = NULL, last_error_name = NULL, completed_at = NULL, "
        "generation_id = ? "
        "WHERE id = ? AND operation = ? AND status IN ('failed', 'cancelled') "
        "RETURNING payload, created_at",
        now,
        generation,
        key,
        operation,
    ).to_list()
    if rows:
        forget_stack(sql, CALLS, key)
        return rows[0]
    _check_owner(sql, operation, key)
    return None


def _check_owner(sql: SqlStorage, operation: str, key: str) -> None:
    stored = sql.exec("SELECT operation FROM durability_calls WHERE id = ?", key).to_list()
    if stored and stored[0]["operation"] != operation:
        raise DuplicateDurableCallError(key, str(stored[0]["operation"]), operation)
