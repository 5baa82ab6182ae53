"""The fanout's queries on its deliveries table are all served by an index.

The plans are read from SQLite itself on the migrated schema, so a change of indexes
or of a query that falls back to scanning every delivery fails here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import pytest

from durability._fanout import fenced
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


@pytest.mark.parametrize("size", fenced.SHAPES)
@pytest.mark.parametrize(
    "statement",
    [
        fenced.claim_statement,
        fenced.remove_statement,
        fenced.finish_statement,
        fenced.release_statement,
    ],
    ids=["claim", "remove", "finish", "release"],
)
def test_fenced_statements_seek_each_row_by_key_without_a_temporary_table(
    db: sqlite3.Connection, statement: object, size: int
) -> None:
    """One primary-key seek per named row (a multi-index OR beyond one row), no scan,
    and no temporary table (each `ack()` of a message runs the one-row shape)."""
    assert callable(statement)
    plan = _plan(db, statement(size))
    lines = plan.split("\n")
    seeks = [line for line in lines if line.startswith("SEARCH durability_fanout_")]
    assert len(seeks) == size, plan
    assert all("USING INDEX sqlite_autoindex_durability_fanout_" in line for line in seeks)
    assert all(line.endswith("=?)") for line in seeks), plan
    if size > 1:
        assert lines[0] == "MULTI-INDEX OR", plan
    assert "SCAN" not in plan and "MATERIALIZE" not in plan and "SUBQUERY" not in plan


def test_every_fenced_statement_binds_at_most_100_parameters() -> None:
    """The Workers SQL API refuses a statement with more than 100 bound parameters."""
    size = fenced.ROWS_PER_STATEMENT
    for statement in (
        fenced.claim_statement,
        fenced.remove_statement,
        fenced.finish_statement,
        fenced.release_statement,
    ):
        assert statement(size).count("?") <= 100


def test_the_inspection_listing_walks_the_next_index(db: sqlite3.Connection) -> None:
    plan = _plan(db, FANOUT_DETAILS_QUERY, [10])
    assert "USING INDEX durability_fanout_deliveries_next_idx" in plan
