"""The SQL of instance rows: create, claim a run, settle it, and the control calls.

Every write a run makes names the run it belongs to (`Fence`: key, generation and the
attempt it claimed) and a row still ``pending``: a run made stale by a terminate, a
restart or a newer run of the same instance changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._context import SqlStorage
from .._errors import SerializedError
from .values import AttrDict, decoded

TERMINAL_STATES = frozenset({"complete", "errored", "terminated"})

_COLUMNS = (
    "instance_key, workflow, instance_id, generation_id, status, next_attempt_at, attempt, "
    "state, params, output, error_name, error_message, created_at, started_at, ended_at, "
    "paused_at, claim_alone"
)


def instance_key(workflow: str, instance_id: str) -> str:
    """The row key of instance `instance_id` of `workflow` (ids never hold a colon)."""
    return f"{workflow}:{instance_id}"


@dataclass(frozen=True, slots=True)
class Fence:
    """The run a write belongs to."""

    key: str
    generation: str
    attempt: int


@dataclass(frozen=True, slots=True)
class InstanceRow:
    """One instance as stored."""

    key: str
    workflow: str
    instance_id: str
    generation: str
    status: str
    next_attempt_at: int
    attempt: int
    state: str
    params: str
    output: str | None
    error_name: str | None
    error_message: str | None
    created_at: int
    started_at: int | None
    ended_at: int | None
    paused_at: int | None
    claim_alone: int | None
    """`None` while no run is claimed; 0 for a run claimed beside others, 1 alone."""

    def status_view(self) -> AttrDict:
        """Cloudflare's `status()` shape: `status`, `error` (`name`, `message`), `output`."""
        error = None
        if self.error_name is not None:
            error = AttrDict(name=self.error_name, message=self.error_message or "")
        output = None if self.output is None else decoded(self.output)
        return AttrDict(status=self.state, error=error, output=output)


def read_instance(sql: SqlStorage, key: str) -> InstanceRow | None:
    """The stored row of `key`, or `None`."""
    rows = list(
        sql.exec(
            f"SELECT {_COLUMNS} FROM durability_workflow_instances WHERE instance_key = ?", key
        ).raw()
    )
    return None if not rows else InstanceRow(*rows[0])


def insert_instance(
    sql: SqlStorage,
    key: str,
    workflow: str,
    instance_id: str,
    generation: str,
    params: str,
    now: int,
    claim_alone: int | None = None,
) -> bool:
    """Add an instance due now: queued, or with `claim_alone` (0 or 1) its first run
    claimed already (the row `claim_run` leaves); False (nothing written) when the key
    exists."""
    claimed = claim_alone is not None
    written = sql.exec(
        "INSERT INTO durability_workflow_instances (instance_key, workflow, instance_id, "
        "generation_id, status, next_attempt_at, attempt, state, params, created_at, "
        "started_at, updated_at, claim_alone) VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, "
        "?, ?, ?) ON CONFLICT (instance_key) DO NOTHING",
        key,
        workflow,
        instance_id,
        generation,
        now,
        1 if claimed else 0,
        "running" if claimed else "queued",
        params,
        now,
        now if claimed else None,
        now,
        claim_alone,
    ).rows_written
    return bool(written)


def claimed_row(
    key: str,
    workflow: str,
    instance_id: str,
    generation: str,
    params: str,
    now: int,
    claim_alone: int,
) -> InstanceRow:
    """The row `insert_instance` wrote with its first run claimed."""
    return InstanceRow(
        key,
        workflow,
        instance_id,
        generation,
        "pending",
        now,
        1,
        "running",
        params,
        None,
        None,
        None,
        now,
        now,
        None,
        None,
        claim_alone,
    )


Due = tuple[str, str, int, int, str, "int | None"]
"""A due instance: key, generation, created_at, attempt (runs so far), workflow and
`claim_alone` (not `None`: its last run never settled)."""


def due_instances(sql: SqlStorage, now: int, limit: int) -> list[Due]:
    """At most `limit` instances due at `now`."""
    return [
        (str(row[0]), str(row[1]), int(row[2]), int(row[3]), str(row[4]), row[5])
        for row in sql.exec(
            "SELECT instance_key, generation_id, created_at, attempt, workflow, claim_alone "
            "FROM durability_workflow_instances WHERE status = 'pending' AND next_attempt_at <= ? "
            "ORDER BY next_attempt_at LIMIT ?",
            now,
            limit,
        ).raw()
    ]


_CLAIM = (
    "UPDATE durability_workflow_instances SET attempt = attempt + 1, "
    "state = CASE WHEN state = 'waitingForPause' THEN state ELSE 'running' END, "
    "started_at = COALESCE(started_at, ?), updated_at = ?, {assignments} "
    "WHERE instance_key = ? AND generation_id = ? AND attempt = ? AND status = 'pending' "
    "AND next_attempt_at <= ? AND claim_alone IS {claimed}"
)


def claim_run(sql: SqlStorage, row: InstanceRow, now: int, alone: bool) -> Fence | None:
    """Count one more run of a due instance read as `row`, run `alone` or beside others;
    `None` if it moved on since (or its last run never settled: see `claim_suspect`)."""
    written = sql.exec(
        _CLAIM.format(assignments="claim_alone = ?", claimed="NULL"),
        now,
        now,
        1 if alone else 0,
        row.key,
        row.generation,
        row.attempt,
        now,
    ).rows_written
    return Fence(row.key, row.generation, row.attempt + 1) if written else None


def claim_suspect(sql: SqlStorage, row: InstanceRow, now: int) -> Fence | None:
    """Claim, to run alone, an instance whose last run never settled (the process stopped
    or the object was evicted while it ran). That interruption is counted on the steps
    that were running then, spared when that run ran beside others. Its due time moves
    to `now`, behind the other suspects: one whose code takes its process down outside
    any step (it spends no attempts) cannot keep them from their turns. `None` if the
    row moved on since it was read."""
    assert row.claim_alone is not None
    written = sql.exec(
        _CLAIM.format(assignments="claim_alone = 1, next_attempt_at = ?", claimed="NOT NULL"),
        now,
        now,
        now,
        row.key,
        row.generation,
        row.attempt,
        now,
    ).rows_written
    if not written:
        return None
    sql.exec(
        "UPDATE durability_workflow_steps SET interruptions = interruptions + 1, "
        "spared = spared + ? WHERE instance_key = ? AND kind = 'do' AND status = 'running'",
        1 - row.claim_alone,
        row.key,
    )
    return Fence(row.key, row.generation, row.attempt + 1)


def holds(sql: SqlStorage, fence: Fence) -> bool:
    """Whether the run of `fence` still owns its instance."""
    found = sql.exec(
        "SELECT 1 FROM durability_workflow_instances WHERE instance_key = ? "
        "AND generation_id = ? AND attempt = ? AND status = 'pending'",
        fence.key,
        fence.generation,
        fence.attempt,
    ).raw()
    return next(found, None) is not None


def _settle(sql: SqlStorage, fence: Fence, assignments: str, *values: Any) -> bool:
    """Write how the run of `fence` ended (it no longer runs: its run settled)."""
    return bool(
        sql.exec(
            f"UPDATE durability_workflow_instances SET {assignments}, claim_alone = NULL "
            "WHERE instance_key = ? AND generation_id = ? AND attempt = ? AND status = 'pending'",
            *values,
            fence.key,
            fence.generation,
            fence.attempt,
        ).rows_written
    )


def settle_complete(sql: SqlStorage, fence: Fence, output: str, now: int) -> bool:
    """The run returned: the instance is complete with `output`."""
    return _settle(
        sql,
        fence,
        "status = 'done', state = 'complete', output = ?, ended_at = ?, updated_at = ?",
        output,
        now,
        now,
    )


def settle_errored(sql: SqlStorage, fence: Fence, error: SerializedError, now: int) -> bool:
    """The run raised (or broke a rule of replay): the instance is errored."""
    return _settle(
        sql,
        fence,
        "status = 'done', state = 'errored', error_name = ?, error_message = ?, "
        "error_stack = ?, ended_at = ?, updated_at = ?",
        error.name,
        error.message,
        error.stack,
        now,
        now,
    )


def settle_waiting(sql: SqlStorage, fence: Fence, wake_at: int, now: int) -> bool:
    """The run suspended until `wake_at` (a sleep, a retry delay, an event's deadline)."""
    return _settle(
        sql,
        fence,
        "next_attempt_at = ?, state = CASE WHEN state = 'waitingForPause' THEN state "
        "ELSE 'waiting' END, updated_at = ?",
        wake_at,
        now,
    )


def settle_paused(sql: SqlStorage, fence: Fence, now: int) -> bool:
    """The run stopped for a pause: the instance waits for `resume()`."""
    return _settle(
        sql,
        fence,
        "status = 'idle', state = 'paused', paused_at = ?, updated_at = ?",
        now,
        now,
    )


def set_state(sql: SqlStorage, key: str, state: str, now: int) -> None:
    """Change the reported state only (a pause asked of a running instance, or undone)."""
    sql.exec(
        "UPDATE durability_workflow_instances SET state = ?, updated_at = ? WHERE instance_key = ?",
        state,
        now,
        key,
    )


def pause_now(sql: SqlStorage, key: str, now: int) -> None:
    """Pause an instance no run holds: it waits for `resume()`."""
    sql.exec(
        "UPDATE durability_workflow_instances SET status = 'idle', state = 'paused', "
        "paused_at = ?, updated_at = ? WHERE instance_key = ?",
        now,
        now,
        key,
    )


def resume_paused(sql: SqlStorage, key: str, now: int) -> int:
    """Make a paused instance due now; its sleeps and deadlines move by the time paused."""
    rows = sql.exec(
        "SELECT paused_at FROM durability_workflow_instances WHERE instance_key = ?", key
    ).to_list()
    paused_at = rows[0]["paused_at"] if rows else None
    if paused_at is not None and now > paused_at:
        sql.exec(
            "UPDATE durability_workflow_steps SET wake_at = wake_at + ? "
            "WHERE instance_key = ? AND wake_at IS NOT NULL AND status != 'complete'",
            now - int(paused_at),
            key,
        )
    sql.exec(
        "UPDATE durability_workflow_instances SET status = 'pending', state = 'queued', "
        "next_attempt_at = ?, paused_at = NULL, updated_at = ? WHERE instance_key = ?",
        now,
        now,
        key,
    )
    return now


def terminate(sql: SqlStorage, key: str, now: int) -> None:
    """End the instance as terminated, whatever runs it."""
    sql.exec(
        "UPDATE durability_workflow_instances SET status = 'done', state = 'terminated', "
        "ended_at = ?, updated_at = ? WHERE instance_key = ?",
        now,
        now,
        key,
    )


def restart(sql: SqlStorage, key: str, generation: str, now: int) -> int:
    """Start the instance over: new generation, empty journal and events, due now."""
    sql.exec("DELETE FROM durability_workflow_steps WHERE instance_key = ?", key)
    sql.exec("DELETE FROM durability_workflow_events WHERE instance_key = ?", key)
    sql.exec(
        "UPDATE durability_workflow_instances SET generation_id = ?, status = 'pending', "
        "state = 'queued', next_attempt_at = ?, attempt = 0, output = NULL, error_name = NULL, "
        "error_message = NULL, error_stack = NULL, started_at = NULL, ended_at = NULL, "
        "paused_at = NULL, claim_alone = NULL, updated_at = ? WHERE instance_key = ?",
        generation,
        now,
        now,
        key,
    )
    return now


def wake_now(sql: SqlStorage, key: str, now: int) -> bool:
    """Make a pending instance due now (an event it waits for arrived); True if moved."""
    return bool(
        sql.exec(
            "UPDATE durability_workflow_instances SET next_attempt_at = ? "
            "WHERE instance_key = ? AND status = 'pending' AND next_attempt_at > ?",
            now,
            key,
            now,
        ).rows_written
    )


def instances_of(sql: SqlStorage, workflow: str) -> list[str]:
    """The instance ids of `workflow`, in key order."""
    return [
        str(row[0])
        for row in sql.exec(
            "SELECT instance_id FROM durability_workflow_instances WHERE workflow = ? "
            "ORDER BY instance_key",
            workflow,
        ).raw()
    ]
