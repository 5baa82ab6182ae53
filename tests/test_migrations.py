"""Schema migrations: up, down, exact versions, stored downs, legacy history, atomicity."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from conftest import START_MS, MakeRuntime
from durability import LATEST, MigrationResult
from durability._alarms import NAMED_ALARM_MIGRATIONS
from durability._engine.migrations import Migration, is_schema_current, migrate
from durability._fanout.schema import FANOUT_MIGRATIONS
from durability._log.schema import LOG_LEASE_MIGRATIONS, LOG_MIGRATIONS
from durability._operations import OPERATION_MIGRATIONS
from durability.runtime import DurableObject, ObjectStub
from durability.testing import VirtualClock

BUILTIN = {
    "operations": OPERATION_MIGRATIONS,
    "namedAlarms": NAMED_ALARM_MIGRATIONS,
    "fanout": FANOUT_MIGRATIONS,
    "log": LOG_MIGRATIONS,
    "logLeases": LOG_LEASE_MIGRATIONS,
}
CALLS_0004 = "durability_0004_calls_generation_and_created_at"
ALARMS_0004 = "durability_0004_alarms_generation_and_created_at"
ALARMS_0008 = "durability_0008_alarms_payload_and_occurrence"
ALARMS_RECURRENCE = "durability_0010_alarms_recurrence"
ALARMS_INTERRUPTIONS = "durability_0015_alarms_interruptions"
RECURRENCE_COLUMNS = (
    "recurrence_kind",
    "recurrence_interval_ms",
    "recurrence_expression",
    "recurrence_tz",
    "recurrence_catch_up",
)
LAB_START_MS = START_MS + 123
"""An odd millisecond, so stamped times show they keep millisecond precision."""


def _steps(capability: str, steps: list[dict[str, Any]] | None) -> tuple[Migration, ...]:
    if steps is None:
        return BUILTIN[capability]
    return tuple(Migration(s["name"], tuple(s["up"]), tuple(s["down"])) for s in steps)


class MigrationLab(DurableObject):
    """A test object whose methods migrate, check and inspect its own storage."""

    async def migrate(
        self,
        capability: str,
        target: str | None = "@latest",
        steps: list[dict[str, Any]] | None = None,
    ) -> dict[str, list[str]]:
        resolved = LATEST if target == "@latest" else target
        result = migrate(self.ctx.storage, capability, _steps(capability, steps), resolved)
        assert isinstance(result, MigrationResult)
        return {"applied": list(result.applied), "rolled_back": list(result.rolled_back)}

    async def current(self, capability: str, steps: list[dict[str, Any]] | None = None) -> bool:
        return is_schema_current(self.ctx.storage.sql, capability, _steps(capability, steps))

    async def query(self, query: str, *bindings: Any) -> list[dict[str, Any]]:
        """Run one statement against the object's database and return its rows."""
        return self.ctx.storage.sql.exec(query, *bindings).to_list()

    async def schema(self) -> list[str]:
        """The object's own tables and indexes (not SQLite's, not the runtime's)."""
        rows = self.ctx.storage.sql.exec(
            "SELECT type, name FROM sqlite_master "
            "WHERE name NOT LIKE 'sqlite^_%' ESCAPE '^' AND name NOT LIKE '^_%' ESCAPE '^' "
            "ORDER BY name"
        )
        return [f"{row['type']}:{row['name']}" for row in rows]

    async def call_migrate(self, capability: str, target: Any) -> None:
        """Call `migrate` with raw arguments, to check its argument validation."""
        resolved = LATEST if target == "@latest" else target
        migrate(self.ctx.storage, capability, OPERATION_MIGRATIONS, resolved)


@pytest.fixture
async def lab(tmp_path: Path, make_runtime: MakeRuntime) -> AsyncIterator[ObjectStub]:
    clock = VirtualClock(start_ms=LAB_START_MS)
    async with make_runtime(path=str(tmp_path), bindings={"LAB": MigrationLab}, clock=clock) as rt:
        yield rt.env.LAB.get_by_name("lab")


def _dicts(migrations: tuple[Migration, ...]) -> list[dict[str, Any]]:
    return [{"name": m.name, "up": list(m.up), "down": list(m.down)} for m in migrations]


def _names(migrations: tuple[Migration, ...]) -> list[str]:
    return [m.name for m in migrations]


async def _history(lab: ObjectStub) -> list[dict[str, Any]]:
    return await lab.query("SELECT name, capability, down FROM durability_migrations ORDER BY id")


async def test_latest_applies_every_capability_in_order(lab: ObjectStub) -> None:
    """Migrating each capability to latest applies its list in order and records it."""
    for capability, migrations in BUILTIN.items():
        assert not await lab.current(capability)
        result = await lab.migrate(capability)
        assert result == {"applied": _names(migrations), "rolled_back": []}
        assert await lab.current(capability)
    history = await _history(lab)
    expected = [(m.name, c) for c, ms in BUILTIN.items() for m in ms]
    assert [(row["name"], row["capability"]) for row in history] == expected
    for row in history:
        assert isinstance(json.loads(row["down"]), list)
    schema = await lab.schema()
    for table in (
        "durability_calls",
        "durability_alarms",
        "durability_fanout_messages",
        "durability_fanout_deliveries",
        "durability_fanout_seq",
        "durability_log_records",
        "durability_log_cursors",
        "durability_log_segments",
        "durability_log_seq",
        "durability_log_leases",
        "durability_log_allocations",
    ):
        assert f"table:{table}" in schema
    for index in (
        "durability_calls_due_idx",
        "durability_calls_open_idx",
        "durability_calls_created_idx",
        "durability_alarms_pending_idx",
        "durability_alarms_created_idx",
    ):
        assert f"index:{index}" in schema


async def test_rerun_is_a_no_op(lab: ObjectStub) -> None:
    """A second migrate to latest changes nothing and reports nothing."""
    await lab.migrate("operations")
    before = await _history(lab)
    assert await lab.migrate("operations") == {"applied": [], "rolled_back": []}
    assert await _history(lab) == before


async def test_seeded_rows_exist_after_create(lab: ObjectStub) -> None:
    """The fanout and log sequences start at zero."""
    await lab.migrate("fanout")
    await lab.migrate("log")
    assert await lab.query("SELECT id, next_seq FROM durability_fanout_seq") == [
        {"id": 1, "next_seq": 0}
    ]
    assert await lab.query("SELECT * FROM durability_log_seq") == [
        {"id": 1, "next_offset": 0, "total_bytes": 0}
    ]


async def test_revert_all_drops_tables_and_history(lab: ObjectStub) -> None:
    """Target None reverts every migration, newest first, and drops the empty history."""
    await lab.migrate("operations")
    await lab.query(
        "INSERT INTO durability_calls (id, operation, payload, status, next_attempt_at, "
        "generation_id, created_at) VALUES ('a', 'op', '{}', 'pending', 0, 'g', 0)"
    )
    result = await lab.migrate("operations", None)
    assert result == {"applied": [], "rolled_back": _names(OPERATION_MIGRATIONS)[::-1]}
    assert await lab.schema() == []
    assert not await lab.current("operations")


async def test_revert_one_capability_keeps_the_others(lab: ObjectStub) -> None:
    """Reverting one capability leaves the shared history of the others in place."""
    await lab.migrate("operations")
    await lab.migrate("log")
    await lab.migrate("log", None)
    assert await lab.current("operations")
    assert [row["capability"] for row in await _history(lab)] == ["operations"] * len(
        OPERATION_MIGRATIONS
    )
    assert "table:durability_log_records" not in await lab.schema()


async def test_exact_version_down_and_back_up(lab: ObjectStub) -> None:
    """Migrating to a named version reverts what follows it; latest re-applies it."""
    names = _names(OPERATION_MIGRATIONS)
    await lab.migrate("operations")
    down = await lab.migrate("operations", names[0])
    assert down == {"applied": [], "rolled_back": names[:0:-1]}
    schema = await lab.schema()
    assert "table:durability_calls" in schema
    assert not any(entry.startswith("index:durability_calls") for entry in schema)
    columns = [row["name"] for row in await lab.query("PRAGMA table_info(durability_calls)")]
    assert "generation_id" not in columns and "created_at" not in columns
    up = await lab.migrate("operations", names[1])
    assert up == {"applied": [names[1]], "rolled_back": []}
    assert "index:durability_calls_pending_idx" in await lab.schema()
    assert await lab.migrate("operations") == {"applied": names[2:], "rolled_back": []}
    assert await lab.current("operations")


async def test_unknown_target_is_rejected_before_any_write(lab: ObjectStub) -> None:
    """An unknown target name raises ValueError and creates nothing."""
    with pytest.raises(ValueError, match='Unknown durability migration target "nope"'):
        await lab.migrate("operations", "nope")
    assert await lab.schema() == []


async def test_bad_arguments_raise_type_and_value_errors(lab: ObjectStub) -> None:
    """Wrong argument types raise TypeError; an empty capability raises ValueError."""
    with pytest.raises(ValueError, match="capability"):
        await lab.call_migrate("", "@latest")
    with pytest.raises(TypeError, match="target"):
        await lab.call_migrate("operations", 3)
    with pytest.raises(ValueError, match="unique"):
        await lab.migrate("x", steps=_dicts(OPERATION_MIGRATIONS[:1]) * 2)
    with pytest.raises(TypeError, match="up"):
        Migration("m", ["CREATE TABLE t (a)"], ())  # type: ignore[arg-type]
    assert await lab.schema() == []
    assert repr(LATEST) == "LATEST"


async def test_stale_stored_downs_are_refreshed(lab: ObjectStub) -> None:
    """A stored down that differs from the code's is rewritten without running anything."""
    await lab.migrate("namedAlarms")
    await lab.query("UPDATE durability_migrations SET down = '[\"SELECT 1\"]'")
    assert not await lab.current("namedAlarms")
    assert await lab.migrate("namedAlarms") == {"applied": [], "rolled_back": []}
    assert await lab.current("namedAlarms")
    stored = [json.loads(row["down"]) for row in await _history(lab)]
    assert stored == [list(m.down) for m in NAMED_ALARM_MIGRATIONS]


def _future(name: str, table: str) -> dict[str, Any]:
    return {
        "name": name,
        "up": [f"CREATE TABLE {table} (a INTEGER)"],
        "down": [f"DROP TABLE {table}"],
    }


async def test_two_future_migrations_are_reverted_with_stored_downs(lab: ObjectStub) -> None:
    """Up to two unknown newer migrations are reverted, newest first, by their stored downs."""
    newer = [*_dicts(OPERATION_MIGRATIONS), _future("f1", "future_one"), _future("f2", "f2_t")]
    await lab.migrate("operations", steps=newer)
    assert not await lab.current("operations")
    result = await lab.migrate("operations")
    assert result == {"applied": [], "rolled_back": ["f2", "f1"]}
    schema = await lab.schema()
    assert "table:future_one" not in schema and "table:f2_t" not in schema
    assert await lab.current("operations")


async def test_future_revert_then_known_revert_are_reported_in_order(lab: ObjectStub) -> None:
    """Future migrations come first in rolled_back, then known ones, newest first."""
    newer = [*_dicts(OPERATION_MIGRATIONS), _future("f1", "future_one")]
    await lab.migrate("operations", steps=newer)
    result = await lab.migrate("operations", None)
    assert result["rolled_back"] == ["f1", *_names(OPERATION_MIGRATIONS)[::-1]]
    assert await lab.schema() == []


async def test_more_than_two_future_migrations_are_refused(lab: ObjectStub) -> None:
    """Three unknown migrations make migrate refuse and leave everything as it was."""
    futures = [_future(f"f{i}", f"future_{i}") for i in range(3)]
    await lab.migrate("operations", steps=[*_dicts(OPERATION_MIGRATIONS), *futures])
    before = (await lab.schema(), await _history(lab))
    with pytest.raises(RuntimeError, match=r"3 migrations ahead .* more than 2"):
        await lab.migrate("operations")
    assert (await lab.schema(), await _history(lab)) == before


async def test_future_migration_without_stored_down_is_an_error(lab: ObjectStub) -> None:
    """A future migration whose down was never stored cannot be reverted."""
    await lab.migrate("operations", steps=[*_dicts(OPERATION_MIGRATIONS), _future("f1", "f1_t")])
    await lab.query("UPDATE durability_migrations SET down = NULL WHERE name = 'f1'")
    with pytest.raises(RuntimeError, match='Migration "f1" has no stored down script'):
        await lab.migrate("operations")
    assert "table:f1_t" in await lab.schema()


async def test_failure_midway_leaves_schema_untouched(lab: ObjectStub) -> None:
    """A failing statement rolls back every statement and history row of the call."""
    broken = [
        _future("m1", "first_table"),
        {"name": "m2", "up": ["CREATE TABLE second_table (a)", "NOT SQL"], "down": ["SELECT 1"]},
    ]
    with pytest.raises(sqlite3.OperationalError):
        await lab.migrate("custom", steps=broken)
    assert await lab.schema() == []
    await lab.migrate("operations")
    before = (await lab.schema(), await _history(lab))
    failing_down = [*_dicts(OPERATION_MIGRATIONS)]
    failing_down[1] = {**failing_down[1], "down": ["DROP INDEX no_such_index"]}
    with pytest.raises(sqlite3.OperationalError):
        await lab.migrate("operations", None, steps=failing_down)
    assert (await lab.schema(), await _history(lab)) == before


async def test_rebuild_preserves_calls_and_stamps_legacy_generations(lab: ObjectStub) -> None:
    """0004 keeps every call, with generation 'legacy:<id>' and created_at = migration time."""
    names = _names(OPERATION_MIGRATIONS)
    await lab.migrate("operations", names[1])
    for key, status in (("a", "pending"), ("b", "completed")):
        await lab.query(
            "INSERT INTO durability_calls (id, operation, payload, status, result, attempt, "
            "next_attempt_at, completed_at) VALUES (?, 'charge', '{}', ?, 'r', 2, 10, 20)",
            key,
            status,
        )
    assert await lab.migrate("operations", names[2]) == {"applied": [names[2]], "rolled_back": []}
    rows = await lab.query(
        "SELECT id, status, result, attempt, next_attempt_at, completed_at, generation_id, "
        "created_at FROM durability_calls ORDER BY id"
    )
    assert rows == [
        {
            "id": key,
            "status": status,
            "result": "r",
            "attempt": 2,
            "next_attempt_at": 10,
            "completed_at": 20,
            "generation_id": f"legacy:{key}",
            "created_at": LAB_START_MS,
        }
        for key, status in (("a", "pending"), ("b", "completed"))
    ]
    await lab.migrate("operations", names[1])
    assert [row["id"] for row in await lab.query("SELECT id FROM durability_calls")] == ["a", "b"]


async def test_rebuild_preserves_named_alarms(lab: ObjectStub) -> None:
    """The alarms 0004 rebuild keeps every occurrence and adds created_at; its down drops it."""
    await lab.migrate("namedAlarms", "durability_0003_create_alarms")
    await lab.query(
        "INSERT INTO durability_alarms (name, generation_id, status, scheduled_at, "
        "next_attempt_at, attempt) VALUES ('renew', 'g1', 'pending', 5, 6, 1)"
    )
    await lab.migrate("namedAlarms")
    rows = await lab.query(
        "SELECT name, generation_id, next_attempt_at, created_at FROM durability_alarms"
    )
    assert rows == [
        {"name": "renew", "generation_id": "g1", "next_attempt_at": 6, "created_at": LAB_START_MS}
    ]
    await lab.migrate("namedAlarms", "durability_0003_create_alarms")
    columns = [row["name"] for row in await lab.query("PRAGMA table_info(durability_alarms)")]
    assert "created_at" not in columns
    assert len(await lab.query("SELECT * FROM durability_alarms")) == 1


async def test_alarm_payload_columns_up_keep_rows_and_down_drops_them(lab: ObjectStub) -> None:
    """0008 adds payload and occurrence (NULL on old rows); its down keeps every row."""
    await lab.migrate("namedAlarms", ALARMS_0004)
    await lab.query(
        "INSERT INTO durability_alarms (name, generation_id, status, scheduled_at, "
        "next_attempt_at, attempt, last_error, last_error_name, created_at) "
        "VALUES ('renew', 'g1', 'failed', 5, 6, 2, 'boom', 'RuntimeError', 7)"
    )
    assert await lab.migrate("namedAlarms", ALARMS_0008) == {
        "applied": [ALARMS_0008],
        "rolled_back": [],
    }
    assert await lab.query("SELECT name, payload, occurrence FROM durability_alarms") == [
        {"name": "renew", "payload": None, "occurrence": None}
    ]
    await lab.query(
        "INSERT INTO durability_alarms (name, generation_id, status, scheduled_at, "
        "next_attempt_at, attempt, created_at, payload, occurrence) "
        "VALUES ('tick', 'g2', 'pending', 8, 8, 0, 9, '{\"v\":1}', 3)"
    )
    down = await lab.migrate("namedAlarms", ALARMS_0004)
    assert down == {"applied": [], "rolled_back": [ALARMS_0008]}
    columns = [row["name"] for row in await lab.query("PRAGMA table_info(durability_alarms)")]
    assert "payload" not in columns and "occurrence" not in columns
    assert await lab.query(
        "SELECT name, generation_id, status, scheduled_at, next_attempt_at, attempt, "
        "last_error, last_error_name, created_at FROM durability_alarms ORDER BY name"
    ) == [
        {
            "name": "renew",
            "generation_id": "g1",
            "status": "failed",
            "scheduled_at": 5,
            "next_attempt_at": 6,
            "attempt": 2,
            "last_error": "boom",
            "last_error_name": "RuntimeError",
            "created_at": 7,
        },
        {
            "name": "tick",
            "generation_id": "g2",
            "status": "pending",
            "scheduled_at": 8,
            "next_attempt_at": 8,
            "attempt": 0,
            "last_error": None,
            "last_error_name": None,
            "created_at": 9,
        },
    ]
    schema = await lab.schema()
    assert "index:durability_alarms_pending_idx" in schema
    assert "index:durability_alarms_created_idx" in schema
    assert await lab.migrate("namedAlarms", ALARMS_0008) == {
        "applied": [ALARMS_0008],
        "rolled_back": [],
    }


async def test_recurrence_columns_up_keep_rows_and_down_keeps_them_as_one_shots(
    lab: ObjectStub,
) -> None:
    """0010 adds the recurrence columns (NULL on old rows); its down keeps every row,
    with its slot, payload and occurrence, as a one-shot."""
    await lab.migrate("namedAlarms", ALARMS_0008)
    await lab.query(
        "INSERT INTO durability_alarms (name, generation_id, status, scheduled_at, "
        "next_attempt_at, attempt, created_at, payload, occurrence) "
        "VALUES ('renew', 'g1', 'pending', 5, 5, 0, 7, NULL, NULL)"
    )
    up = await lab.migrate("namedAlarms", ALARMS_RECURRENCE)
    assert up == {"applied": [ALARMS_RECURRENCE], "rolled_back": []}
    columns = ", ".join(RECURRENCE_COLUMNS)
    assert await lab.query(f"SELECT {columns} FROM durability_alarms") == [
        dict.fromkeys(RECURRENCE_COLUMNS)
    ]
    await lab.query(
        "INSERT INTO durability_alarms (name, generation_id, status, scheduled_at, "
        f"next_attempt_at, attempt, created_at, payload, occurrence, {columns}) "
        "VALUES ('tick', 'g2', 'pending', 8, 8, 0, 9, '\"p\"', 4, "
        "'cron', NULL, '0 9 * * *', 'Europe/Paris', 'all')"
    )
    with pytest.raises(sqlite3.IntegrityError):
        await lab.query(
            "INSERT INTO durability_alarms (name, generation_id, status, scheduled_at, "
            "next_attempt_at, attempt, created_at, recurrence_kind) "
            "VALUES ('bad', 'g3', 'pending', 1, 1, 0, 1, 'weekly')"
        )
    down = await lab.migrate("namedAlarms", ALARMS_0008)
    assert down == {"applied": [], "rolled_back": [ALARMS_RECURRENCE]}
    table = await lab.query("PRAGMA table_info(durability_alarms)")
    assert not set(RECURRENCE_COLUMNS) & {row["name"] for row in table}
    assert await lab.query(
        "SELECT name, generation_id, scheduled_at, next_attempt_at, created_at, payload, "
        "occurrence FROM durability_alarms ORDER BY name"
    ) == [
        {
            "name": "renew",
            "generation_id": "g1",
            "scheduled_at": 5,
            "next_attempt_at": 5,
            "created_at": 7,
            "payload": None,
            "occurrence": None,
        },
        {
            "name": "tick",
            "generation_id": "g2",
            "scheduled_at": 8,
            "next_attempt_at": 8,
            "created_at": 9,
            "payload": '"p"',
            "occurrence": 4,
        },
    ]
    schema = await lab.schema()
    assert "index:durability_alarms_pending_idx" in schema
    assert "index:durability_alarms_created_idx" in schema
    assert await lab.migrate("namedAlarms") == {
        "applied": [ALARMS_RECURRENCE, ALARMS_INTERRUPTIONS],
        "rolled_back": [],
    }
    assert await lab.current("namedAlarms")


async def test_interruption_columns_up_and_down_keep_every_alarm(lab: ObjectStub) -> None:
    """0015 adds `claim_alone` (NULL), `interruptions` and `spared` (0); its down rebuilds the
    table without them, every row with its slot, payload and recurrence kept."""
    await lab.migrate("namedAlarms", ALARMS_RECURRENCE)
    columns = ", ".join(RECURRENCE_COLUMNS)
    await lab.query(
        "INSERT INTO durability_alarms (name, generation_id, status, scheduled_at, "
        f"next_attempt_at, attempt, created_at, payload, occurrence, {columns}) "
        "VALUES ('tick', 'g2', 'pending', 8, 8, 2, 9, '\"p\"', 4, "
        "'cron', NULL, '0 9 * * *', 'Europe/Paris', 'all')"
    )
    rows = await lab.query("SELECT * FROM durability_alarms")
    schema = await lab.schema()
    assert await lab.migrate("namedAlarms") == {
        "applied": [ALARMS_INTERRUPTIONS],
        "rolled_back": [],
    }
    assert await lab.query("SELECT * FROM durability_alarms") == [
        {**rows[0], "claim_alone": None, "interruptions": 0, "spared": 0}
    ]
    down = await lab.migrate("namedAlarms", ALARMS_RECURRENCE)
    assert down == {"applied": [], "rolled_back": [ALARMS_INTERRUPTIONS]}
    assert await lab.query("SELECT * FROM durability_alarms") == rows
    assert await lab.schema() == schema


async def _make_v2_database(lab: ObjectStub) -> None:
    """A database as the v2 library left it: both tables at 0004, one combined history row."""
    await lab.migrate("operations", CALLS_0004)
    await lab.migrate("namedAlarms", ALARMS_0004)
    await lab.query("DROP TABLE durability_migrations")
    await lab.query(
        "CREATE TABLE durability_migrations (id INTEGER PRIMARY KEY AUTOINCREMENT, "
        "name TEXT NOT NULL UNIQUE, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)"
    )
    for name in (
        "durability_0001_create_calls",
        "durability_0002_pending_index",
        "durability_0003_create_alarms",
        "durability_0004_generation_and_created_at",
    ):
        await lab.query("INSERT INTO durability_migrations (name) VALUES (?)", name)
    await lab.query(
        "INSERT INTO durability_calls (id, operation, payload, status, next_attempt_at, "
        "generation_id, created_at) VALUES ('keep', 'op', '{}', 'pending', 0, 'g', 7)"
    )


async def test_v2_history_is_translated_without_running_schema(lab: ObjectStub) -> None:
    """The v2 combined row is split per capability, kept, and nothing is re-applied.

    Only what v2 never had (the alarms' payload and recurrence columns, the calls'
    cancelled status and listing indexes) is applied on top."""
    await _make_v2_database(lab)
    schema = await lab.schema()
    assert await lab.migrate("operations", CALLS_0004) == {"applied": [], "rolled_back": []}
    assert await lab.migrate("namedAlarms") == {
        "applied": [ALARMS_0008, ALARMS_RECURRENCE, ALARMS_INTERRUPTIONS],
        "rolled_back": [],
    }
    assert await lab.schema() == schema
    history = {row["name"]: row["capability"] for row in await _history(lab)}
    assert history == {
        "durability_0001_create_calls": "operations",
        "durability_0002_pending_index": "operations",
        "durability_0003_create_alarms": "namedAlarms",
        "durability_0004_generation_and_created_at": None,
        CALLS_0004: "operations",
        ALARMS_0004: "namedAlarms",
        ALARMS_0008: "namedAlarms",
        ALARMS_RECURRENCE: "namedAlarms",
        ALARMS_INTERRUPTIONS: "namedAlarms",
    }
    newer = _names(OPERATION_MIGRATIONS)[_names(OPERATION_MIGRATIONS).index(CALLS_0004) + 1 :]
    assert await lab.migrate("operations") == {"applied": newer, "rolled_back": []}
    assert await lab.current("operations") and await lab.current("namedAlarms")
    assert await lab.query("SELECT id, created_at FROM durability_calls") == [
        {"id": "keep", "created_at": 7}
    ]


async def test_v2_history_is_not_current_until_migrated(lab: ObjectStub) -> None:
    """A v2 history table (no capability column) is never reported current."""
    await _make_v2_database(lab)
    assert not await lab.current("operations")
    assert await lab.current("custom", steps=[])


CALLS_0009 = "durability_0009_calls_cancelled_and_listing"


async def test_calls_0009_allows_cancelled_and_indexes_listing(lab: ObjectStub) -> None:
    """0009 keeps every call, allows status 'cancelled' and adds the two listing indexes."""
    await lab.migrate("operations", CALLS_0004)
    await lab.query(
        "INSERT INTO durability_calls (id, operation, payload, status, result, attempt, "
        "next_attempt_at, completed_at, generation_id, created_at) "
        "VALUES ('a', 'charge', '{}', 'completed', 'r', 2, 10, 20, 'g', 7)"
    )
    with pytest.raises(sqlite3.IntegrityError):
        await lab.query("UPDATE durability_calls SET status = 'cancelled'")
    assert await lab.migrate("operations", CALLS_0009) == {
        "applied": [CALLS_0009],
        "rolled_back": [],
    }
    rows = await lab.query(
        "SELECT id, status, result, attempt, next_attempt_at, completed_at, generation_id, "
        "created_at FROM durability_calls"
    )
    assert rows == [
        {
            "id": "a",
            "status": "completed",
            "result": "r",
            "attempt": 2,
            "next_attempt_at": 10,
            "completed_at": 20,
            "generation_id": "g",
            "created_at": 7,
        }
    ]
    await lab.query("UPDATE durability_calls SET status = 'cancelled'")
    schema = await lab.schema()
    for index in ("operation", "operation_status", "pending", "created"):
        assert f"index:durability_calls_{index}_idx" in schema


async def test_calls_0009_down_turns_cancelled_into_failed(lab: ObjectStub) -> None:
    """Reverting 0009 keeps every call, a cancelled one as failed, and drops its indexes."""
    await lab.migrate("operations", CALLS_0009)
    for key, status in (("a", "cancelled"), ("b", "pending")):
        await lab.query(
            "INSERT INTO durability_calls (id, operation, payload, status, attempt, "
            "next_attempt_at, last_error, last_error_name, generation_id, created_at) "
            "VALUES (?, 'charge', '{}', ?, 1, 10, 'stop', 'DurableCancelledError', 'g', 7)",
            key,
            status,
        )
    assert await lab.migrate("operations", CALLS_0004) == {
        "applied": [],
        "rolled_back": [CALLS_0009],
    }
    rows = await lab.query(
        "SELECT id, status, last_error, last_error_name, generation_id, created_at "
        "FROM durability_calls ORDER BY id"
    )
    assert rows == [
        {
            "id": key,
            "status": status,
            "last_error": "stop",
            "last_error_name": "DurableCancelledError",
            "generation_id": "g",
            "created_at": 7,
        }
        for key, status in (("a", "failed"), ("b", "pending"))
    ]
    schema = await lab.schema()
    assert "index:durability_calls_operation_idx" not in schema
    assert "index:durability_calls_operation_status_idx" not in schema
    assert "index:durability_calls_pending_idx" in schema
    assert "index:durability_calls_created_idx" in schema
    with pytest.raises(sqlite3.IntegrityError):
        await lab.query("UPDATE durability_calls SET status = 'cancelled'")


FANOUT_0005 = "durability_0005_create_fanout"
FANOUT_0011 = "durability_0011_fanout_delivery_indexes"
FANOUT_0016 = "durability_0016_fanout_interruptions"
_DELIVERY_ROW = (
    "INSERT INTO durability_fanout_deliveries (id, message_key, target_id, seq, status, "
    "phase, attempt, next_attempt_at, created_at, generation_id) "
    "VALUES (?, 'k', ?, ?, 'pending', 'delivery', ?, 50, 7, 'g')"
)


async def _delivery_indexes(lab: ObjectStub) -> dict[str, str]:
    rows = await lab.query(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' "
        "AND tbl_name = 'durability_fanout_deliveries' AND sql IS NOT NULL ORDER BY name"
    )
    return {row["name"]: row["sql"] for row in rows}


async def _deliveries(lab: ObjectStub) -> list[dict[str, Any]]:
    return await lab.query(
        "SELECT id, target_id, seq, attempt, next_attempt_at FROM durability_fanout_deliveries "
        "ORDER BY id"
    )


async def test_fanout_0011_replaces_the_delivery_indexes_keeping_rows(lab: ObjectStub) -> None:
    """0011 swaps the three delivery indexes for two; its down restores them exactly."""
    await lab.migrate("fanout", FANOUT_0005)
    old_indexes = await _delivery_indexes(lab)
    assert sorted(old_indexes) == [
        "durability_fanout_deliveries_created_idx",
        "durability_fanout_deliveries_pending_idx",
        "durability_fanout_deliveries_target_idx",
    ]
    await lab.query(
        "INSERT INTO durability_fanout_messages (key, id, payload, targets, remaining, seq, "
        "created_at, generation_id) VALUES ('k', 'm', '{}', '[\"a\",\"b\"]', 2, 0, 7, 'g')"
    )
    for key, target, attempt in (("d1", "a", 0), ("d2", "b", 3)):
        await lab.query(_DELIVERY_ROW, key, target, 0, attempt)
    rows = await _deliveries(lab)
    assert await lab.migrate("fanout", FANOUT_0011) == {"applied": [FANOUT_0011], "rolled_back": []}
    assert await _deliveries(lab) == rows
    assert set(await _delivery_indexes(lab)) == {
        "durability_fanout_deliveries_due_idx",
        "durability_fanout_deliveries_next_idx",
    }
    assert await lab.migrate("fanout", FANOUT_0005) == {"applied": [], "rolled_back": [FANOUT_0011]}
    assert await _deliveries(lab) == rows
    assert await _delivery_indexes(lab) == old_indexes
    assert len(await lab.query("SELECT key FROM durability_fanout_messages")) == 1


async def test_fanout_0016_adds_interruptions_and_its_down_keeps_every_row(
    lab: ObjectStub,
) -> None:
    """0016 rebuilds the deliveries table with `claim_alone`, `interruptions` and `spared`
    and the reason `interrupted`; its down keeps every row (an `interrupted` reason read as
    `exhausted`) and the 0011 indexes exactly."""
    await lab.migrate("fanout", FANOUT_0011)
    indexes = await _delivery_indexes(lab)
    for key, target, attempt in (("d1", "a", 0), ("d2", "b", 3)):
        await lab.query(_DELIVERY_ROW, key, target, 0, attempt)
    rows = await _deliveries(lab)
    assert await lab.migrate("fanout") == {"applied": [FANOUT_0016], "rolled_back": []}
    assert await lab.current("fanout")
    assert await _deliveries(lab) == rows
    assert await _delivery_indexes(lab) == indexes
    stored = await lab.query(
        "SELECT claim_alone, interruptions, spared FROM durability_fanout_deliveries"
    )
    assert stored == [{"claim_alone": None, "interruptions": 0, "spared": 0}] * 2
    await lab.query(
        "UPDATE durability_fanout_deliveries SET phase = 'dead_letter', "
        "dead_letter_reason = 'interrupted' WHERE id = 'd2'"
    )
    assert await lab.migrate("fanout", FANOUT_0011) == {
        "applied": [],
        "rolled_back": [FANOUT_0016],
    }
    assert await _delivery_indexes(lab) == indexes
    reasons = await lab.query(
        "SELECT id, dead_letter_reason FROM durability_fanout_deliveries ORDER BY id"
    )
    assert reasons == [
        {"id": "d1", "dead_letter_reason": None},
        {"id": "d2", "dead_letter_reason": "exhausted"},
    ]
    with pytest.raises(sqlite3.IntegrityError):
        await lab.query(
            "UPDATE durability_fanout_deliveries SET dead_letter_reason = 'interrupted'"
        )
