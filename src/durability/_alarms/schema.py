"""The `durability_alarms` table's schema: the named alarms capability's `Migration` list.

Names and statements are fixed once released: a stored history row names them, and an
older library reverts newer ones through the `down` statements stored with them.
"""

from __future__ import annotations

from typing import Final

from .._engine import ALARMS_0004, Migration, migration_time_ms

ALARMS_0008: Final = "durability_0008_alarms_payload_and_occurrence"
ALARMS_RECURRENCE: Final = "durability_0010_alarms_recurrence"
_RECURRENCE_COLUMNS: Final = (
    "recurrence_kind, recurrence_interval_ms, recurrence_expression, recurrence_tz, "
    "recurrence_catch_up"
)

_ALARM_COLUMNS: Final = (
    "name, generation_id, status, scheduled_at, next_attempt_at, attempt, "
    "last_error, last_error_name"
)
_ALARM_TABLE_BODY: Final = (
    "name TEXT PRIMARY KEY, "
    "generation_id TEXT NOT NULL, "
    "status TEXT NOT NULL CHECK (status IN ('pending', 'failed')), "
    "scheduled_at INTEGER NOT NULL, "
    "next_attempt_at INTEGER NOT NULL, "
    "attempt INTEGER NOT NULL DEFAULT 0, "
    "last_error TEXT, "
    "last_error_name TEXT"
)
_ALARMS_PENDING_INDEX: Final = (
    "CREATE INDEX durability_alarms_pending_idx ON durability_alarms (status, next_attempt_at)"
)

NAMED_ALARM_MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        name="durability_0003_create_alarms",
        up=(f"CREATE TABLE durability_alarms ({_ALARM_TABLE_BODY})", _ALARMS_PENDING_INDEX),
        down=("DROP INDEX durability_alarms_pending_idx", "DROP TABLE durability_alarms"),
    ),
    Migration(
        name=ALARMS_0004,
        up=(
            f"CREATE TABLE durability_alarms_next ({_ALARM_TABLE_BODY}, "
            "created_at INTEGER NOT NULL)",
            f"INSERT INTO durability_alarms_next ({_ALARM_COLUMNS}, created_at) "
            f"SELECT {_ALARM_COLUMNS}, {migration_time_ms(ALARMS_0004)} "
            "FROM durability_alarms",
            "DROP TABLE durability_alarms",
            "ALTER TABLE durability_alarms_next RENAME TO durability_alarms",
            _ALARMS_PENDING_INDEX,
            "CREATE INDEX durability_alarms_created_idx ON durability_alarms (created_at)",
        ),
        down=(
            f"CREATE TABLE durability_alarms_previous ({_ALARM_TABLE_BODY})",
            f"INSERT INTO durability_alarms_previous ({_ALARM_COLUMNS}) "
            f"SELECT {_ALARM_COLUMNS} FROM durability_alarms",
            "DROP TABLE durability_alarms",
            "ALTER TABLE durability_alarms_previous RENAME TO durability_alarms",
            _ALARMS_PENDING_INDEX,
        ),
    ),
    Migration(
        name=ALARMS_0008,
        up=(
            "ALTER TABLE durability_alarms ADD COLUMN payload TEXT",
            "ALTER TABLE durability_alarms ADD COLUMN occurrence INTEGER",
        ),
        down=(
            f"CREATE TABLE durability_alarms_previous ({_ALARM_TABLE_BODY}, "
            "created_at INTEGER NOT NULL)",
            f"INSERT INTO durability_alarms_previous ({_ALARM_COLUMNS}, created_at) "
            f"SELECT {_ALARM_COLUMNS}, created_at FROM durability_alarms",
            "DROP TABLE durability_alarms",
            "ALTER TABLE durability_alarms_previous RENAME TO durability_alarms",
            _ALARMS_PENDING_INDEX,
            "CREATE INDEX durability_alarms_created_idx ON durability_alarms (created_at)",
        ),
    ),
    Migration(
        name=ALARMS_RECURRENCE,
        up=(
            "ALTER TABLE durability_alarms ADD COLUMN recurrence_kind TEXT "
            "CHECK (recurrence_kind IN ('every', 'cron'))",
            "ALTER TABLE durability_alarms ADD COLUMN recurrence_interval_ms INTEGER",
            "ALTER TABLE durability_alarms ADD COLUMN recurrence_expression TEXT",
            "ALTER TABLE durability_alarms ADD COLUMN recurrence_tz TEXT",
            "ALTER TABLE durability_alarms ADD COLUMN recurrence_catch_up TEXT",
        ),
        down=(
            f"CREATE TABLE durability_alarms_previous ({_ALARM_TABLE_BODY}, "
            "created_at INTEGER NOT NULL, payload TEXT, occurrence INTEGER)",
            f"INSERT INTO durability_alarms_previous ({_ALARM_COLUMNS}, created_at, payload, "
            f"occurrence) SELECT {_ALARM_COLUMNS}, created_at, payload, occurrence "
            "FROM durability_alarms",
            "DROP TABLE durability_alarms",
            "ALTER TABLE durability_alarms_previous RENAME TO durability_alarms",
            _ALARMS_PENDING_INDEX,
            "CREATE INDEX durability_alarms_created_idx ON durability_alarms (created_at)",
        ),
    ),
    Migration(
        name="durability_0015_alarms_interruptions",
        up=(
            "ALTER TABLE durability_alarms ADD COLUMN claim_alone INTEGER",
            "ALTER TABLE durability_alarms ADD COLUMN interruptions INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE durability_alarms ADD COLUMN spared INTEGER NOT NULL DEFAULT 0",
        ),
        down=(
            f"CREATE TABLE durability_alarms_previous ({_ALARM_TABLE_BODY}, "
            "created_at INTEGER NOT NULL, payload TEXT, occurrence INTEGER, "
            "recurrence_kind TEXT CHECK (recurrence_kind IN ('every', 'cron')), "
            "recurrence_interval_ms INTEGER, recurrence_expression TEXT, recurrence_tz TEXT, "
            "recurrence_catch_up TEXT)",
            f"INSERT INTO durability_alarms_previous ({_ALARM_COLUMNS}, created_at, payload, "
            f"occurrence, {_RECURRENCE_COLUMNS}) SELECT {_ALARM_COLUMNS}, created_at, payload, "
            f"occurrence, {_RECURRENCE_COLUMNS} FROM durability_alarms",
            "DROP TABLE durability_alarms",
            "ALTER TABLE durability_alarms_previous RENAME TO durability_alarms",
            _ALARMS_PENDING_INDEX,
            "CREATE INDEX durability_alarms_created_idx ON durability_alarms (created_at)",
        ),
    ),
)
"""Capability "namedAlarms": the `durability_alarms` table.

0008 adds `payload` (the serialized JSON value given when the occurrence was scheduled,
NULL for none) and `occurrence` (the slot number of a recurrence's occurrence, NULL for
a one-shot). Its down rebuilds the table rather than dropping columns, so it runs on
any SQLite. 0010 adds the recurrence of `every` and `cron` alarms (all NULL for a
one-shot): its kind, interval, cron expression and time zone, and catch-up policy; its
down rebuilds the table too, keeping every row as a one-shot of its current slot. 0015
adds `claim_alone`, `interruptions` and `spared`, as 0014 does to `durability_calls` (poison
isolation); its down rebuilds the table without them, keeping every row."""
