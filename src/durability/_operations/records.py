"""Reading operation records: one `OperationResult` per row, and paged listings.

A listing walks one operation's rows in id order from just after `after`, through the
index on ``(operation, id)`` or, filtered by status, the one on ``(operation, status,
id)``: a page costs its own rows, never a scan of the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal, get_args

from .._context import Row, SqlStorage
from .._engine import TableSpec, read_stack
from .._errors import DuplicateDurableCallError, SerializedError
from .._serialization import deserialize, serialize
from .._types import JsonValue, SqlValue
from .._validate import check_positive_int

Status = Literal["not_found", "pending", "completed", "failed", "cancelled"]
StoredStatus = Literal["pending", "completed", "failed", "cancelled"]
STORED_STATUSES: Final = frozenset(get_args(StoredStatus))

CALLS: Final = TableSpec("durability_calls", "id")

RECORD_COLUMNS: Final = (
    "id, operation, status, result, attempt, next_attempt_at, last_error, last_error_name, "
    "generation_id"
)
"""What a read selects from `durability_calls` to build an `OperationResult`."""


@dataclass(frozen=True, kw_only=True, slots=True)
class OperationResult:
    """The stored state of one call.

    ``pending`` has `attempt`, `next_attempt_at` and `last_error` (the last failure's
    message, `None` before any); ``completed`` has `result` and `attempt`; ``failed``
    and ``cancelled`` have `attempt` and `error`; ``not_found`` has nothing else.
    `id` and `operation` name the call; they are left out of equality, which compares
    the stored state.
    """

    status: Status
    result: JsonValue = None
    attempt: int | None = None
    next_attempt_at: int | None = None
    last_error: str | None = None
    error: SerializedError | None = None
    id: str | None = field(default=None, compare=False)
    operation: str | None = field(default=None, compare=False)


def to_result(sql: SqlStorage, row: Row) -> OperationResult:
    """The `OperationResult` of one stored row (selected with `RECORD_COLUMNS`)."""
    status = row["status"]
    named = {"id": row["id"], "operation": row["operation"]}
    if status == "pending":
        return OperationResult(
            status="pending",
            attempt=row["attempt"],
            next_attempt_at=row["next_attempt_at"],
            last_error=row["last_error"],
            **named,
        )
    if status in ("failed", "cancelled"):
        error = SerializedError(
            row["last_error_name"] or "Error",
            row["last_error"] or f"Durable operation {status}",
            read_stack(sql, CALLS, str(row["id"]), str(row["generation_id"])),
        )
        return OperationResult(status=status, attempt=row["attempt"], error=error, **named)
    if row["result"] is None:
        raise RuntimeError(f'Completed durable call "{row["id"]}" has no result')
    return OperationResult(
        status="completed", result=deserialize(row["result"]), attempt=row["attempt"], **named
    )


def list_results(
    sql: SqlStorage, operation: str, *, status: object, limit: object, after: object
) -> list[OperationResult]:
    """Up to `limit` of `operation`'s records with ids after `after`, in id order,
    only those in `status` when it is given."""
    if status is not None and not isinstance(status, str):
        raise TypeError(f"status must be a string or None, got {type(status).__name__}")
    if status is not None and status not in STORED_STATUSES:
        raise ValueError(
            f"status must be one of {', '.join(sorted(STORED_STATUSES))} or None, got {status!r}"
        )
    count = check_positive_int("limit", limit)
    if after is not None and not isinstance(after, str):
        raise TypeError(f"after must be a string or None, got {type(after).__name__}")
    query, bindings = list_query(operation, None if status is None else str(status), after)
    rows = sql.exec(f"{query} LIMIT ?", *bindings, count)
    return [to_result(sql, row) for row in rows]


def list_query(operation: str, status: str | None, after: str | None) -> tuple[str, list[SqlValue]]:
    """The SELECT (without its LIMIT) of one listing page, and its bindings.

    A status other than completed also names `status != 'completed'` as written, so
    SQLite may read the partial index of the calls not completed."""
    conditions = ["operation = ?"]
    bindings: list[SqlValue] = [operation]
    if status is not None:
        conditions.append("status = ?")
        bindings.append(status)
        if status != "completed":
            conditions.append("status != 'completed'")
    if after is not None:
        conditions.append("id > ?")
        bindings.append(after)
    query = (
        f"SELECT {RECORD_COLUMNS} FROM durability_calls "
        f"WHERE {' AND '.join(conditions)} ORDER BY id ASC"
    )
    return query, bindings


def read_call(sql: SqlStorage, operation: str, key: str) -> Row | None:
    """Record `key` of `operation` (its `RECORD_COLUMNS`), or `None` when there is none;
    `DuplicateDurableCallError` when the id belongs to another operation."""
    rows = sql.exec(f"SELECT {RECORD_COLUMNS} FROM durability_calls WHERE id = ?", key).to_list()
    if not rows:
        return None
    row = rows[0]
    if row["operation"] != operation:
        raise DuplicateDurableCallError(key, str(row["operation"]), operation)
    return row


Success = tuple[int, str]
"""What a wait keeps of a success it was told of: the attempt, the result as stored."""


def success_of(generation: object) -> Callable[[Row], Success | None]:
    """What a wait makes of a settlement's notification: for a success of record
    generation `generation`, its attempt and its result serialized as it was stored
    (`None` for anything else: the wait then reads the row)."""

    def stored(settled: Row) -> Success | None:
        if settled.get("generation_id") != generation or "result" not in settled:
            return None
        return int(settled["attempt"]), serialize(settled["result"], "result")

    return stored


def completed_result(success: Success, id: str | None, operation: str) -> OperationResult:
    """The `OperationResult` a read of the completed record would give (`to_result`)."""
    attempt, text = success
    return OperationResult(
        status="completed", result=deserialize(text), attempt=attempt, id=id, operation=operation
    )
