"""The SQL of the step journal and of the events an instance was sent.

A step row is keyed by its instance, its kind (``do``, ``sleep``, ``wait``) and its name.
`seq` numbers the steps of an instance in the order they began. Statuses: a ``do`` step
is ``running`` (an attempt began), ``retrying`` (its next attempt is due at `wake_at`),
``complete`` (`result` holds its value) or ``errored`` (it failed for good); a sleep is
``sleeping`` until `wake_at`, then ``complete``; a wait is ``waiting`` (its deadline is
`wake_at`, its event type `detail`), then ``complete`` (`result` holds the event) or
``timed_out``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._context import SqlStorage
from .._errors import SerializedError


@dataclass(slots=True)
class StepRow:
    """One journal row, as read when a run starts (and kept current by that run)."""

    kind: str
    name: str
    seq: int
    status: str
    attempt: int
    detail: str | None
    result: str | None
    error_name: str | None
    error_message: str | None
    wake_at: int | None
    interruptions: int = 0
    """Its attempts that never settled (the process stopped or the object was evicted)."""
    spared: int = 0
    """Those of them that ran beside other instances: they do not count toward its retries."""


def load_journal(sql: SqlStorage, key: str) -> dict[tuple[str, str], StepRow]:
    """Every step row of instance `key`, by `(kind, name)`."""
    rows = sql.exec(
        "SELECT kind, name, seq, status, attempt, detail, result, error_name, error_message, "
        "wake_at, interruptions, spared FROM durability_workflow_steps WHERE instance_key = ?",
        key,
    ).raw()
    return {(str(row[0]), str(row[1])): StepRow(*row) for row in rows}


def begin(
    sql: SqlStorage,
    key: str,
    step: tuple[str, str, int],
    status: str,
    attempt: int,
    detail: str | None,
    wake_at: int | None,
    now: int,
) -> None:
    """Write a step's row as it starts or moves on; `step` is its kind, name and the
    `seq` a new row takes."""
    kind, name, seq = step
    sql.exec(
        "INSERT INTO durability_workflow_steps (instance_key, kind, name, seq, status, "
        "attempt, detail, started_at, wake_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (instance_key, kind, name) DO UPDATE SET status = excluded.status, "
        "attempt = excluded.attempt, wake_at = excluded.wake_at",
        key,
        kind,
        name,
        seq,
        status,
        attempt,
        detail,
        now,
        wake_at,
    )


def complete(sql: SqlStorage, key: str, kind: str, name: str, result: str | None, now: int) -> None:
    """A step's final success: `result` (a stored envelope, or `None` for a sleep)."""
    sql.exec(
        "UPDATE durability_workflow_steps SET status = 'complete', result = ?, ended_at = ?, "
        "wake_at = NULL WHERE instance_key = ? AND kind = ? AND name = ?",
        result,
        now,
        key,
        kind,
        name,
    )


def fail(
    sql: SqlStorage,
    key: str,
    kind: str,
    name: str,
    status: str,
    error: SerializedError,
    wake_at: int | None,
    now: int,
) -> None:
    """A failed attempt (``retrying`` at `wake_at`) or the final failure (``errored``,
    ``timed_out``), with its error."""
    sql.exec(
        "UPDATE durability_workflow_steps SET status = ?, error_name = ?, error_message = ?, "
        "error_stack = ?, wake_at = ?, ended_at = CASE WHEN ? = 'retrying' THEN NULL ELSE ? END "
        "WHERE instance_key = ? AND kind = ? AND name = ?",
        status,
        error.name,
        error.message,
        error.stack,
        wake_at,
        status,
        now,
        key,
        kind,
        name,
    )


def take_event(sql: SqlStorage, key: str, event_type: str) -> tuple[str, int] | None:
    """Remove and return the oldest unclaimed event of `event_type`: `(payload, sent_at)`."""
    rows = list(
        sql.exec(
            "SELECT id, payload, sent_at FROM durability_workflow_events "
            "WHERE instance_key = ? AND type = ? ORDER BY id LIMIT 1",
            key,
            event_type,
        ).raw()
    )
    if not rows:
        return None
    sql.exec("DELETE FROM durability_workflow_events WHERE id = ?", rows[0][0])
    return str(rows[0][1]), int(rows[0][2])


def has_event(sql: SqlStorage, key: str, types: set[str]) -> bool:
    """Whether an unclaimed event of one of `types` waits for instance `key`."""
    for event_type in types:
        found = sql.exec(
            "SELECT 1 FROM durability_workflow_events WHERE instance_key = ? AND type = ? LIMIT 1",
            key,
            event_type,
        ).raw()
        if next(found, None) is not None:
            return True
    return False


def add_event(sql: SqlStorage, key: str, event_type: str, payload: str, now: int) -> bool:
    """Keep an event for the instance; True when a wait of its journal awaits that type."""
    sql.exec(
        "INSERT INTO durability_workflow_events (instance_key, type, payload, sent_at) "
        "VALUES (?, ?, ?, ?)",
        key,
        event_type,
        payload,
        now,
    )
    found = sql.exec(
        "SELECT 1 FROM durability_workflow_steps WHERE instance_key = ? AND kind = 'wait' "
        "AND status = 'waiting' AND detail = ? LIMIT 1",
        key,
        event_type,
    ).raw()
    return next(found, None) is not None
