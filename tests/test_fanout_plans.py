"""The fanout's queries on its deliveries table are all served by an index.

The plans are read from SQLite itself on the migrated schema, so a change of indexes
or of a query that falls back to scanning every delivery fails here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import pytest

from durability._fanout import writes
from durability._fanout.engine import NEXT_PENDING_QUERY
from durability._fanout.schema import FANOUT_MIGRATIONS
from durability._fanout.store import (
    DUE_FIRST_QUERY,
    DUE_RETRY_QUERY,
    FIRST_TARGET,
    NEXT_TARGET_QUERY,
)
from durability.cli._inspect.sections import FANOUT_DETAILS_QUERY


@pytest.fixture
def db() -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:")
    for migration in FANOUT_MIGRATIONS:
        for statement in migration.up:
            connection.execute(statement)
    return connection


def _plan(db: sqlite3.Connection, query: str, bindings: Sequence[object] | None = None) -> str:
    count = query.count("?")
    rows = db.execute(f"EXPLAIN QUERY PLAN {query}", bindings or [None] * count)
    return "\n".join(str(row[3]) for row in rows)


@pytest.mark.parametrize("query", [DUE_FIRST_QUERY, DUE_RETRY_QUERY])
def test_due_reads_seek_the_targets_rows_in_the_due_index(
    db: sqlite3.Connection, query: str
) -> None:
    plan = _plan(db, query, ["t", 0, 10])
    assert "SEARCH d USING INDEX durability_fanout_deliveries_due_idx (target_id=? AND phase=?" in (
        plan
    )
    assert "SEARCH m USING INDEX sqlite_autoindex_durability_fanout_messages_1 (key=?)" in plan


def test_the_earliest_time_of_a_phase_is_one_seek(db: sqlite3.Connection) -> None:
    plan = _plan(db, NEXT_PENDING_QUERY, ["delivery"])
    assert plan == (
        "SEARCH durability_fanout_deliveries USING COVERING INDEX "
        "durability_fanout_deliveries_next_idx (phase=?)"
    )


def test_target_listing_walks_the_due_index(db: sqlite3.Connection) -> None:
    assert "COVERING INDEX durability_fanout_deliveries_due_idx (target_id>?)" in _plan(
        db, NEXT_TARGET_QUERY, ["t"]
    )
    assert "COVERING INDEX durability_fanout_deliveries_due_idx" in _plan(db, FIRST_TARGET)


@pytest.mark.parametrize("size", [1, 4, 16, 32])
@pytest.mark.parametrize(
    "statement", [writes._claim_statement, writes._remove_statement], ids=["claim", "remove"]
)
def test_settlement_finds_each_row_by_primary_key(
    db: sqlite3.Connection, statement: object, size: int
) -> None:
    assert callable(statement)
    plan = _plan(db, statement(size))
    assert "SEARCH d USING INDEX sqlite_autoindex_durability_fanout_deliveries_1 (id=?)" in plan
    assert "SCAN durability_fanout_deliveries" not in plan
    assert "SCAN d\n" not in f"{plan}\n"


@pytest.mark.parametrize("size", [1, 32])
def test_manifest_releases_find_each_manifest_by_key(db: sqlite3.Connection, size: int) -> None:
    for query in (writes._release_statement(size), writes._delete_manifests_statement(size)):
        plan = _plan(db, query)
        assert "USING INDEX sqlite_autoindex_durability_fanout_messages_1 (key=?)" in plan
        assert "SCAN durability_fanout_messages" not in plan


def test_every_settlement_statement_binds_at_most_100_parameters() -> None:
    """The Workers SQL API refuses a statement with more than 100 bound parameters."""
    size = writes.ROWS_PER_STATEMENT
    for query in (
        writes._claim_statement(size),
        writes._remove_statement(size),
        writes._release_statement(size),
        writes._delete_manifests_statement(size),
    ):
        assert query.count("?") <= 100


def test_the_inspection_listing_walks_the_next_index(db: sqlite3.Connection) -> None:
    plan = _plan(db, FANOUT_DETAILS_QUERY, [10])
    assert "USING INDEX durability_fanout_deliveries_next_idx" in plan


@pytest.mark.parametrize("query", [writes._CLAIM_ONE, writes._REMOVE_ONE, writes._RELEASE_ONE])
def test_one_row_settlement_is_one_key_lookup_without_a_temporary_table(
    db: sqlite3.Connection, query: str
) -> None:
    """One row (each `ack()` of a message) builds no temporary table: one seek by key."""
    plan = _plan(db, query)
    assert plan.startswith("SEARCH durability_fanout_"), plan
    assert "USING INDEX sqlite_autoindex_durability_fanout_" in plan
    assert "MATERIALIZE" not in plan and "SUBQUERY" not in plan and "\n" not in plan
