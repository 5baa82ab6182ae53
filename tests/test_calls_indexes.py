"""durability_0012 and 0013: the lean `durability_calls` indexes and the status check by
comparisons, up and down with rows kept, and the index each hot query on the table reads
(EXPLAIN QUERY PLAN)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest

from conftest import MakeRuntime
from durability import LATEST, SqlCursor
from durability._engine.migrations import migrate
from durability._engine.schemas import ERROR_STACK_MIGRATIONS, STACKS_CAPABILITY
from durability._engine.tables import due_rows, pending_head, purge_created_before
from durability._operations import OPERATION_MIGRATIONS
from durability._operations.records import CALLS, list_query
from durability._types import SqlValue
from durability.cli._inspect.sections import operation_counts, operation_details
from durability.cli._inspect.tables import Tables
from durability.runtime import DurableObject, ObjectStub

CALLS_0009 = "durability_0009_calls_cancelled_and_listing"
CALLS_0012 = "durability_0012_calls_lean_indexes"
CALLS_0013 = "durability_0013_calls_status_comparisons"
CALLS_0014 = "durability_0014_calls_interruptions"
TABLE = "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'durability_calls'"
STATUSES = ("pending", "completed", "failed", "cancelled")
INDEXES = (
    "SELECT name, sql FROM sqlite_master WHERE type = 'index' "
    "AND tbl_name = 'durability_calls' AND sql IS NOT NULL ORDER BY name"
)


class PlanRecorder:
    """An `SqlStorage` that records the query plan of every statement before running it."""

    def __init__(self, sql: Any) -> None:
        self.sql = sql
        self.plans: list[str] = []

    def exec(self, query: str, *bindings: SqlValue | bool) -> SqlCursor:
        rows = self.sql.exec(f"EXPLAIN QUERY PLAN {query}", *bindings)
        self.plans.append(" | ".join(str(row["detail"]) for row in rows))
        cursor: SqlCursor = self.sql.exec(query, *bindings)
        return cursor


class CallsLab(DurableObject):
    """Migrates its own `durability_calls` and reports its rows, indexes and plans."""

    async def migrate(self, target: str | None = None) -> None:
        """Migrate to `target`, or to the latest version when it is `None`."""
        migrate(self.ctx.storage, "operations", OPERATION_MIGRATIONS, target or LATEST)

    async def query(self, query: str, *bindings: Any) -> list[dict[str, Any]]:
        return self.ctx.storage.sql.exec(query, *bindings).to_list()

    async def seed(self, count: int) -> None:
        """`count` calls of two operations, cycling through every status."""
        for number in range(count):
            self.ctx.storage.sql.exec(
                "INSERT INTO durability_calls (id, operation, payload, status, attempt, "
                "next_attempt_at, generation_id, created_at) VALUES (?, ?, '{}', ?, 1, ?, 'g', ?)",
                f"k{number:04}",
                f"op{number % 2}",
                STATUSES[number % len(STATUSES)],
                number,
                number,
            )

    async def engine_plans(self) -> dict[str, str]:
        """The plan of the scheduler's reads and of the retention purge."""
        migrate(self.ctx.storage, STACKS_CAPABILITY, ERROR_STACK_MIGRATIONS, LATEST)
        recorder = PlanRecorder(self.ctx.storage.sql)
        pending_head(recorder, CALLS, 10)
        due_rows(recorder, CALLS, "id, generation_id, attempt", 50, 10)
        purge_created_before(recorder, CALLS, 5)
        return dict(zip(("head", "due", "purge"), recorder.plans, strict=False))

    async def listing_plan(self, status: str | None, after: str | None) -> str:
        query, bindings = list_query("op1", status, after)
        rows = self.ctx.storage.sql.exec(f"EXPLAIN QUERY PLAN {query} LIMIT ?", *bindings, 10)
        return " | ".join(str(row["detail"]) for row in rows)


@pytest.fixture
async def lab(tmp_path: Path, make_runtime: MakeRuntime) -> AsyncIterator[ObjectStub]:
    async with make_runtime(path=str(tmp_path), bindings={"LAB": CallsLab}) as rt:
        yield rt.env.LAB.get_by_name("lab")


async def test_up_and_down_keep_rows_and_restore_the_indexes_exactly(lab: ObjectStub) -> None:
    """0012 swaps two indexes for partial ones; its down brings back the 0009 ones as
    they were, and neither direction loses or changes a row."""
    await lab.migrate(CALLS_0009)
    before = await lab.query(INDEXES)
    await lab.seed(12)
    rows = await lab.query("SELECT * FROM durability_calls ORDER BY id")
    await lab.migrate(CALLS_0013)
    assert await lab.query(INDEXES) == [
        {
            "name": "durability_calls_created_idx",
            "sql": "CREATE INDEX durability_calls_created_idx ON durability_calls (created_at)",
        },
        {
            "name": "durability_calls_due_idx",
            "sql": "CREATE INDEX durability_calls_due_idx ON durability_calls (next_attempt_at) "
            "WHERE status = 'pending'",
        },
        {
            "name": "durability_calls_open_idx",
            "sql": "CREATE INDEX durability_calls_open_idx ON durability_calls "
            "(operation, status, id) WHERE status != 'completed'",
        },
        {
            "name": "durability_calls_operation_idx",
            "sql": "CREATE INDEX durability_calls_operation_idx "
            "ON durability_calls (operation, id)",
        },
    ]
    assert await lab.query("SELECT * FROM durability_calls ORDER BY id") == rows
    await lab.migrate(CALLS_0009)
    assert await lab.query(INDEXES) == before
    assert await lab.query("SELECT * FROM durability_calls ORDER BY id") == rows
    assert [row["name"] for row in await lab.query("SELECT name FROM durability_migrations")][
        -1
    ] == CALLS_0009


async def test_the_status_check_compares_and_keeps_every_row_both_ways(lab: ObjectStub) -> None:
    """0013 rebuilds the table with the status checked by comparisons (no temporary index
    per written row), refusing the same statuses; its down restores the `IN` check. Rows
    and indexes are the same in every shape."""
    await lab.migrate(CALLS_0012)
    await lab.seed(12)
    rows = await lab.query("SELECT * FROM durability_calls ORDER BY id")
    indexes = await lab.query(INDEXES)
    [before] = await lab.query(TABLE)
    assert "status IN ('pending', 'completed', 'failed', 'cancelled')" in before["sql"]
    await lab.migrate(CALLS_0013)
    [after] = await lab.query(TABLE)
    assert (
        "CHECK (status = 'pending' OR status = 'completed' OR status = 'failed' "
        "OR status = 'cancelled')" in after["sql"]
    )
    assert await lab.query("SELECT * FROM durability_calls ORDER BY id") == rows
    assert await lab.query(INDEXES) == indexes
    update = "EXPLAIN UPDATE durability_calls SET status = 'completed' WHERE id = 'k0000'"
    assert "OpenEphemeral" not in [row["opcode"] for row in await lab.query(update)]
    with pytest.raises(sqlite3.IntegrityError, match="CHECK constraint failed"):
        await lab.query("UPDATE durability_calls SET status = 'paused' WHERE id = 'k0000'")
    await lab.migrate(CALLS_0012)
    assert await lab.query(TABLE) == [before]
    assert await lab.query("SELECT * FROM durability_calls ORDER BY id") == rows
    assert await lab.query(INDEXES) == indexes


async def test_interruption_columns_come_and_go_keeping_every_row(lab: ObjectStub) -> None:
    """0014 adds `claim_alone` (NULL), `interruptions` and `spared` (0) to every row; its down
    rebuilds the 0013 table: rows, indexes and the table's text as they were."""
    await lab.migrate(CALLS_0013)
    await lab.seed(12)
    rows = await lab.query("SELECT * FROM durability_calls ORDER BY id")
    indexes = await lab.query(INDEXES)
    table = await lab.query(TABLE)
    await lab.migrate(CALLS_0014)
    assert await lab.query("SELECT * FROM durability_calls ORDER BY id") == [
        {**row, "claim_alone": None, "interruptions": 0, "spared": 0} for row in rows
    ]
    assert await lab.query(INDEXES) == indexes
    await lab.migrate(CALLS_0013)
    assert await lab.query(TABLE) == table
    assert await lab.query("SELECT * FROM durability_calls ORDER BY id") == rows
    assert await lab.query(INDEXES) == indexes


async def test_scheduler_reads_and_purge_use_an_index(lab: ObjectStub) -> None:
    """The due read and the pending head read the partial index of pending calls in
    order (no sort); the purge searches the creation index."""
    await lab.migrate()
    await lab.seed(40)
    plans = await lab.engine_plans()
    assert plans["head"] == "SCAN durability_calls USING INDEX durability_calls_due_idx"
    assert plans["due"] == (
        "SEARCH durability_calls USING INDEX durability_calls_due_idx (next_attempt_at<?)"
    )
    assert plans["purge"] == (
        "SEARCH durability_calls USING COVERING INDEX durability_calls_created_idx (created_at<?)"
    )


@pytest.mark.parametrize("status", [None, *STATUSES])
@pytest.mark.parametrize("after", [None, "k0001"])
async def test_listing_pages_read_one_index_in_id_order(
    lab: ObjectStub, status: str | None, after: str | None
) -> None:
    """A status other than completed lists through the index of calls not completed;
    every call, or the completed ones, through the operation index. Never a sort."""
    await lab.migrate()
    await lab.seed(40)
    plan = await lab.listing_plan(status, after)
    index = "durability_calls_open_idx" if status not in (None, "completed") else "operation_idx"
    assert plan.startswith("SEARCH durability_calls USING INDEX ")
    assert index in plan
    assert "TEMP B-TREE" not in plan


def test_inspect_counts_read_the_index_of_calls_not_completed() -> None:
    """The status counts scan only the calls not completed; completed is the rest."""
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE TABLE durability_migrations (name TEXT, applied_at TEXT)")
    for migration in OPERATION_MIGRATIONS:
        for statement in migration.up:
            connection.execute(statement)
    for number, status in enumerate(["completed"] * 5 + ["failed", "pending", "pending"]):
        connection.execute(
            "INSERT INTO durability_calls (id, operation, payload, status, next_attempt_at, "
            "created_at) VALUES (?, 'op', '{}', ?, ?, 0)",
            (f"k{number}", status, number),
        )
    statements: list[str] = []
    connection.set_trace_callback(statements.append)
    tables = Tables(connection)
    assert operation_counts(tables) == {"completed": 5, "failed": 1, "pending": 2}
    details = operation_details(tables)
    assert isinstance(details, list)
    assert [cast(dict[str, Any], row)["id"] for row in details] == ["k5", "k6", "k7"]
    plans = [
        " | ".join(row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {statement}"))
        for statement in statements
        if "durability_calls" in statement
    ]
    assert all(
        "SCAN durability_calls USING" in plan or "SCAN record USING" in plan for plan in plans
    )
    assert "durability_calls_open_idx" in plans[0]
