"""The `durability_calls` table's schema: the operations capability's `Migration` list.

Names and statements are fixed once released: a stored history row names them, and an
older library reverts newer ones through the `down` statements stored with them.
"""

from __future__ import annotations

from typing import Final

from .._engine import CALLS_0004, Migration, migration_time_ms

_CALL_COLUMNS: Final = (
    "id, operation, payload, status, result, attempt, next_attempt_at, "
    "last_error, last_error_name, completed_at"
)


def _call_table_body(status_check: str) -> str:
    """The `durability_calls` columns, `status` constrained by `status_check`."""
    return (
        "id TEXT PRIMARY KEY, "
        "operation TEXT NOT NULL, "
        "payload TEXT NOT NULL, "
        f"status TEXT NOT NULL CHECK ({status_check}), "
        "result TEXT, "
        "attempt INTEGER NOT NULL DEFAULT 0, "
        "next_attempt_at INTEGER NOT NULL, "
        "last_error TEXT, "
        "last_error_name TEXT, "
        "completed_at INTEGER"
    )


_CALL_TABLE_BODY: Final = _call_table_body("status IN ('pending', 'completed', 'failed')")
_CALLS_0004_TAIL: Final = (
    ", generation_id TEXT NOT NULL DEFAULT 'legacy', created_at INTEGER NOT NULL"
)
_CALL_TABLE_BODY_0009: Final = (
    _call_table_body("status IN ('pending', 'completed', 'failed', 'cancelled')") + _CALLS_0004_TAIL
)
"""From 0009 on: cancelled calls; the 0004 columns as 0004 added them."""
_CALL_TABLE_BODY_0013: Final = (
    _call_table_body(
        "status = 'pending' OR status = 'completed' OR status = 'failed' OR status = 'cancelled'"
    )
    + _CALLS_0004_TAIL
)
"""From 0013 on: the same statuses, checked by comparisons (SQLite builds a temporary
index for an `IN` list each time it checks a written row)."""
_CALLS_PENDING_INDEX: Final = (
    "CREATE INDEX durability_calls_pending_idx ON durability_calls (status, next_attempt_at)"
)
_CALLS_CREATED_INDEX: Final = (
    "CREATE INDEX durability_calls_created_idx ON durability_calls (created_at)"
)
_CALLS_0009_COLUMNS: Final = f"{_CALL_COLUMNS}, generation_id, created_at"
_CALLS_OPERATION_STATUS_INDEX: Final = (
    "CREATE INDEX durability_calls_operation_status_idx ON durability_calls (operation, status, id)"
)

_CALLS_0012_INDEXES: Final = (
    _CALLS_CREATED_INDEX,
    "CREATE INDEX durability_calls_operation_idx ON durability_calls (operation, id)",
    "CREATE INDEX durability_calls_due_idx ON durability_calls (next_attempt_at) "
    "WHERE status = 'pending'",
    "CREATE INDEX durability_calls_open_idx ON durability_calls (operation, status, id) "
    "WHERE status != 'completed'",
)


def _rebuild_calls(body: str) -> tuple[str, ...]:
    """Rebuild `durability_calls` (as of 0009, with the 0012 indexes) as `body`, every
    row kept."""
    return (
        f"CREATE TABLE durability_calls_next ({body})",
        f"INSERT INTO durability_calls_next ({_CALLS_0009_COLUMNS}) "
        f"SELECT {_CALLS_0009_COLUMNS} FROM durability_calls",
        "DROP TABLE durability_calls",
        "ALTER TABLE durability_calls_next RENAME TO durability_calls",
        *_CALLS_0012_INDEXES,
    )


OPERATION_MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        name="durability_0001_create_calls",
        up=(f"CREATE TABLE durability_calls ({_CALL_TABLE_BODY})",),
        down=("DROP TABLE durability_calls",),
    ),
    Migration(
        name="durability_0002_pending_index",
        up=(_CALLS_PENDING_INDEX,),
        down=("DROP INDEX durability_calls_pending_idx",),
    ),
    Migration(
        name=CALLS_0004,
        up=(
            f"CREATE TABLE durability_calls_next ({_CALL_TABLE_BODY}, "
            "generation_id TEXT NOT NULL DEFAULT 'legacy', "
            "created_at INTEGER NOT NULL)",
            f"INSERT INTO durability_calls_next ({_CALL_COLUMNS}, generation_id, created_at) "
            f"SELECT {_CALL_COLUMNS}, 'legacy:' || id, {migration_time_ms(CALLS_0004)} "
            "FROM durability_calls",
            "DROP TABLE durability_calls",
            "ALTER TABLE durability_calls_next RENAME TO durability_calls",
            _CALLS_PENDING_INDEX,
            _CALLS_CREATED_INDEX,
        ),
        down=(
            f"CREATE TABLE durability_calls_previous ({_CALL_TABLE_BODY})",
            f"INSERT INTO durability_calls_previous ({_CALL_COLUMNS}) "
            f"SELECT {_CALL_COLUMNS} FROM durability_calls",
            "DROP TABLE durability_calls",
            "ALTER TABLE durability_calls_previous RENAME TO durability_calls",
            _CALLS_PENDING_INDEX,
        ),
    ),
    Migration(
        name="durability_0009_calls_cancelled_and_listing",
        up=(
            f"CREATE TABLE durability_calls_next ({_CALL_TABLE_BODY_0009})",
            f"INSERT INTO durability_calls_next ({_CALLS_0009_COLUMNS}) "
            f"SELECT {_CALLS_0009_COLUMNS} FROM durability_calls",
            "DROP TABLE durability_calls",
            "ALTER TABLE durability_calls_next RENAME TO durability_calls",
            _CALLS_PENDING_INDEX,
            _CALLS_CREATED_INDEX,
            "CREATE INDEX durability_calls_operation_idx ON durability_calls (operation, id)",
            _CALLS_OPERATION_STATUS_INDEX,
        ),
        down=(
            f"CREATE TABLE durability_calls_previous ({_CALL_TABLE_BODY}, "
            "generation_id TEXT NOT NULL DEFAULT 'legacy', created_at INTEGER NOT NULL)",
            # A cancelled call is terminal and never runs again: before 0009 that is failed.
            f"INSERT INTO durability_calls_previous ({_CALLS_0009_COLUMNS}) "
            "SELECT id, operation, payload, "
            "CASE status WHEN 'cancelled' THEN 'failed' ELSE status END, "
            "result, attempt, next_attempt_at, last_error, last_error_name, completed_at, "
            "generation_id, created_at FROM durability_calls",
            "DROP TABLE durability_calls",
            "ALTER TABLE durability_calls_previous RENAME TO durability_calls",
            _CALLS_PENDING_INDEX,
            _CALLS_CREATED_INDEX,
        ),
    ),
    Migration(
        name="durability_0012_calls_lean_indexes",
        up=(
            "DROP INDEX durability_calls_pending_idx",
            "DROP INDEX durability_calls_operation_status_idx",
            *_CALLS_0012_INDEXES[2:],
        ),
        down=(
            "DROP INDEX durability_calls_open_idx",
            "DROP INDEX durability_calls_due_idx",
            _CALLS_PENDING_INDEX,
            _CALLS_OPERATION_STATUS_INDEX,
        ),
    ),
    Migration(
        name="durability_0013_calls_status_comparisons",
        up=_rebuild_calls(_CALL_TABLE_BODY_0013),
        down=_rebuild_calls(_CALL_TABLE_BODY_0009),
    ),
    Migration(
        name="durability_0014_calls_interruptions",
        up=(
            "ALTER TABLE durability_calls ADD COLUMN claim_alone INTEGER",
            "ALTER TABLE durability_calls ADD COLUMN interruptions INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE durability_calls ADD COLUMN spared INTEGER NOT NULL DEFAULT 0",
        ),
        down=_rebuild_calls(_CALL_TABLE_BODY_0013),
    ),
)
"""Capability "operations": the `durability_calls` table.

0012 keeps only pending rows in the scheduler's index and only rows not completed in
the by-status listing index, so completing a call deletes two index entries instead of
moving them. 0014 adds what poison isolation keeps of an attempt in flight:
`claim_alone` (NULL while no attempt is claimed; 0 for an attempt claimed beside
others, 1 for one claimed alone, 2 for a first attempt its record's insert claimed
ahead of a permit, which may not have started), `interruptions` (attempts that never
settled: the process stopped or the object was evicted while they ran or waited for a
permit) and `spared` (those of them that may have run beside others, which do not
count toward `max_attempts`); its down rebuilds the table without them, keeping every
row."""
