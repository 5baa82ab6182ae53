"""The SQL of `durability_alarms` rows beyond the shared attempt CAS, and their state view.

One row per name holds the name's current occurrence: its slot (`scheduled_at`,
`occurrence`), attempts, last error, payload and, for a recurrence, how it recurs. A
recurrence keeps its one row: each slot it moves to gets a new generation (so a new
idempotency key) and a fresh attempt budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .._context import SqlStorage
from .._engine import TableSpec, forget_stack, read_stack
from .._errors import SerializedError
from .recurrence import Recurrence, RecurrenceSlot, loaded, stored

ALARMS = TableSpec("durability_alarms", "name")

RECURRENCE_COLUMNS = (
    "recurrence_kind, recurrence_interval_ms, recurrence_expression, recurrence_tz, "
    "recurrence_catch_up"
)
STATE_COLUMNS = (
    "name, generation_id, status, scheduled_at, next_attempt_at, attempt, last_error, "
    f"last_error_name, {RECURRENCE_COLUMNS}"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class NamedAlarmState:
    """A named alarm's stored occurrence, as `get()` and `pending()` report it.

    `status` is "running" while an attempt runs in this instance. `last_error` is the
    last failed attempt's error (with its traceback as `stack` when one was stored); for
    a recurrence it may be the error of a previous slot that failed for good.
    """

    name: str
    scheduled_time: int
    next_attempt_at: int
    attempt: int
    status: Literal["pending", "running", "failed"]
    last_error: SerializedError | None
    recurrence: Recurrence | None


def upsert(
    sql: SqlStorage,
    name: str,
    generation: str,
    slot: RecurrenceSlot | int,
    now: int,
    payload: str | None,
    recurrence: Recurrence | None,
) -> None:
    """Store `name`'s new occurrence (a one-shot at a time, or a recurrence at its slot),
    replacing whatever the name had, whatever its state."""
    at, occurrence = (slot, None) if isinstance(slot, int) else (slot.at, slot.occurrence)
    sql.exec(
        "INSERT INTO durability_alarms (name, generation_id, status, scheduled_at, "
        "next_attempt_at, attempt, last_error, last_error_name, created_at, payload, "
        f"occurrence, {RECURRENCE_COLUMNS}) "
        "VALUES (?, ?, 'pending', ?, ?, 0, NULL, NULL, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT(name) DO UPDATE SET generation_id = excluded.generation_id, "
        "status = 'pending', scheduled_at = excluded.scheduled_at, "
        "next_attempt_at = excluded.next_attempt_at, attempt = 0, last_error = NULL, "
        "last_error_name = NULL, created_at = excluded.created_at, claim_alone = NULL, "
        "interruptions = 0, spared = 0, "
        "payload = excluded.payload, occurrence = excluded.occurrence, "
        "recurrence_kind = excluded.recurrence_kind, "
        "recurrence_interval_ms = excluded.recurrence_interval_ms, "
        "recurrence_expression = excluded.recurrence_expression, "
        "recurrence_tz = excluded.recurrence_tz, "
        "recurrence_catch_up = excluded.recurrence_catch_up",
        name,
        generation,
        at,
        at,
        now,
        payload,
        occurrence,
        *stored(recurrence),
    )


def move_to_slot(
    sql: SqlStorage,
    name: str,
    generation: str,
    expected_status: str,
    expected_attempt: int | None,
    new_generation: str,
    slot: RecurrenceSlot,
    now: int,
    *,
    keep_error: bool,
) -> bool:
    """Move the recurrence of `name` (still at `generation`) to `slot`, pending with a new
    generation and no attempt yet; True when it was still there to move.

    `keep_error` keeps the last error (a slot that failed for good stays visible until a
    later slot succeeds), and moves its traceback to the new generation.
    """
    error_columns = "" if keep_error else "last_error = NULL, last_error_name = NULL, "
    attempt_check = "" if expected_attempt is None else " AND attempt = ?"
    bindings: tuple[Any, ...] = () if expected_attempt is None else (expected_attempt,)
    written = sql.exec(
        "UPDATE durability_alarms SET generation_id = ?, status = 'pending', "
        f"scheduled_at = ?, next_attempt_at = ?, attempt = 0, {error_columns}"
        "occurrence = ?, created_at = ?, claim_alone = NULL, interruptions = 0, spared = 0 "
        f"WHERE name = ? AND generation_id = ? AND status = ?{attempt_check}",
        new_generation,
        slot.at,
        slot.at,
        slot.occurrence,
        now,
        name,
        generation,
        expected_status,
        *bindings,
    ).rows_written
    if written and keep_error:
        sql.exec(
            "UPDATE durability_error_stacks SET generation_id = ? "
            "WHERE record_table = ? AND record_key = ? AND generation_id = ?",
            new_generation,
            ALARMS.name,
            name,
            generation,
        )
    return bool(written)


def delete_pending(sql: SqlStorage, name: str) -> tuple[str, int] | None:
    """Delete `name`'s pending occurrence (and its traceback); its generation and attempt."""
    rows = sql.exec(
        "DELETE FROM durability_alarms WHERE name = ? AND status = 'pending' "
        "RETURNING generation_id, attempt",
        name,
    ).to_list()
    if not rows:
        return None
    forget_stack(sql, ALARMS, name)
    return str(rows[0]["generation_id"]), int(rows[0]["attempt"])


def read_states(
    sql: SqlStorage, name: str | None, running: dict[str, str]
) -> list[NamedAlarmState]:
    """The state of `name` (or of every pending name, earliest next attempt first).

    `running` maps the names with an attempt running here to that attempt's generation.
    """
    if name is None:
        cursor = sql.exec(
            f"SELECT {STATE_COLUMNS} FROM durability_alarms WHERE status = 'pending' "
            "ORDER BY next_attempt_at ASC, name ASC"
        )
    else:
        cursor = sql.exec(f"SELECT {STATE_COLUMNS} FROM durability_alarms WHERE name = ?", name)
    return [_state(sql, row, running) for row in cursor.to_list()]


def _state(sql: SqlStorage, row: dict[str, Any], running: dict[str, str]) -> NamedAlarmState:
    name = str(row["name"])
    generation = str(row["generation_id"])
    error = None
    if row["last_error_name"] is not None or row["last_error"] is not None:
        error = SerializedError(
            str(row["last_error_name"] or "Error"),
            str(row["last_error"] or ""),
            read_stack(sql, ALARMS, name, generation),
        )
    status: Literal["pending", "running", "failed"] = "failed"
    if row["status"] == "pending":
        status = "running" if running.get(name) == generation else "pending"
    return NamedAlarmState(
        name=name,
        scheduled_time=int(row["scheduled_at"]),
        next_attempt_at=int(row["next_attempt_at"]),
        attempt=int(row["attempt"]),
        status=status,
        last_error=error,
        recurrence=loaded(
            row["recurrence_kind"],
            row["recurrence_interval_ms"],
            row["recurrence_expression"],
            row["recurrence_tz"],
            row["recurrence_catch_up"],
        ),
    )
