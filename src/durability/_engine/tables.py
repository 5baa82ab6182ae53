"""Compare-and-set SQL shared by every table that runs attempts.

Every write after a record's creation names its key, its generation, ``status =
'pending'`` and the attempt it expects, and learns from the rows it wrote (or what it
returned) whether it won.
A stale execution (timed out, purged, replaced) therefore loses silently and can never
touch a newer record. Table and column names are fixed identifiers owned by the
capabilities; every value is a bound parameter.

A stored error's traceback lives beside its record in ``durability_error_stacks`` (one
row per record, of the generation that failed), written in the same transaction as the
error and swept when records are purged.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

from .._context import SqlStorage
from .._errors import SerializedError
from .._types import SqlValue


@dataclass(frozen=True, slots=True)
class TableSpec:
    """A record table: its name and primary-key column (both fixed identifiers)."""

    name: str
    key: str


def claim_attempt(
    sql: SqlStorage,
    table: TableSpec,
    key: str,
    generation: str,
    seen: int,
    now: int,
    alone: bool = False,
) -> int | None:
    """Durably count one more attempt of a row read with `seen` attempts and due at `now`,
    recording whether it runs `alone` (poison isolation: see `claim_suspect`).

    Returns the new attempt, or `None` when the row changed since it was read (gone,
    replaced, settled, rescheduled, claimed again, or left by an interrupted attempt).
    The caller checks the attempt limit first (attempts counted: `attempt - spared`);
    `is_exhausted` tells whether a lost claim hit it. A row whose insert claimed it
    ahead of its permit (`claim_alone` 2) and that never settled is claimed as any:
    that lost attempt may have started beside others, so it is spared and counted as
    interrupted.
    """
    written = sql.exec(
        f"UPDATE {table.name} SET attempt = ?, claim_alone = ?, {_REQUEUED} "
        f"WHERE {table.key} = ? AND generation_id = ? AND status = 'pending' AND attempt = ? "
        f"AND next_attempt_at <= ? AND {_CLAIMABLE.format(name=table.name)}",
        seen + 1,
        1 if alone else 0,
        key,
        generation,
        seen,
        now,
    ).rows_written
    return seen + 1 if written else None


_CLAIMABLE = "({name}.claim_alone IS NULL OR {name}.claim_alone = 2)"
"""A row an ordinary claim may take: none claimed, or claimed by its insert ahead of its
permit and left so (a suspect is claimed alone instead)."""

_REQUEUED = (
    "spared = spared + (claim_alone IS 2), interruptions = interruptions + (claim_alone IS 2)"
)
"""What an ordinary claim adds for an attempt its insert claimed ahead of a permit and
that never settled (see `claim_attempt`)."""


def claim_suspect(
    sql: SqlStorage, table: TableSpec, key: str, generation: str, seen: int, now: int
) -> int | None:
    """Claim, to run alone, a row whose last attempt was claimed and never settled (the
    process stopped or the object was evicted while it ran): a suspect.

    That interruption is counted in `interruptions`; it uses up an attempt only if that
    attempt ran alone (`claim_alone = 1`): one claimed beside others is `spared`, so a
    neighbour of a poison is never charged for the poison's crash. Returns the new
    attempt (`seen + 1`, as every claim), or `None` when the row changed since it was
    read. The caller checks the attempt limit first.
    """
    written = sql.exec(
        f"UPDATE {table.name} SET attempt = attempt + 1, spared = spared + 1 - claim_alone, "
        "claim_alone = 1, interruptions = interruptions + 1 "
        f"WHERE {table.key} = ? AND generation_id = ? AND status = 'pending' AND attempt = ? "
        "AND next_attempt_at <= ? AND claim_alone IN (0, 1)",
        key,
        generation,
        seen,
        now,
    ).rows_written
    return seen + 1 if written else None


def is_exhausted(
    sql: SqlStorage, table: TableSpec, key: str, generation: str, max_attempts: int
) -> bool:
    """True when the row of this generation is still pending at its attempt limit (the
    attempts that count: those not `spared`, nor claimed ahead of a permit and left)."""
    rows = sql.exec(
        f"SELECT 1 FROM {table.name} WHERE {table.key} = ? AND generation_id = ? "
        "AND status = 'pending' AND attempt - spared - (claim_alone IS 2) >= ?",
        key,
        generation,
        max_attempts,
    ).to_list()
    return bool(rows)


def exhaust_attempts(
    sql: SqlStorage,
    table: TableSpec,
    key: str,
    generation: str,
    max_attempts: int,
    error: SerializedError,
) -> int | None:
    """Fail a pending row already at its limit; its stored attempt, or `None` if not owned.
    A row left by an interrupted attempt counts that interruption too."""
    rows = sql.exec(
        f"UPDATE {table.name} SET status = 'failed', last_error = ?, last_error_name = ?, "
        "interruptions = interruptions + (claim_alone IS NOT NULL), "
        "spared = spared + (claim_alone IS 2), claim_alone = NULL "
        f"WHERE {table.key} = ? AND generation_id = ? AND status = 'pending' "
        "AND attempt - spared - (claim_alone IS 2) >= ? RETURNING attempt",
        error.message,
        error.name,
        key,
        generation,
        max_attempts,
    ).to_list()
    if not rows:
        return None
    _keep_stack(sql, table, key, generation, error.stack)
    return int(rows[0]["attempt"])


def settle_failure(
    sql: SqlStorage,
    table: TableSpec,
    key: str,
    generation: str,
    attempt: int,
    *,
    terminal: bool,
    next_attempt_at: int,
    error: SerializedError,
) -> bool:
    """Record a failed attempt (failed, or pending again at `next_attempt_at`); True if owned."""
    rows = sql.exec(
        f"UPDATE {table.name} SET status = ?, next_attempt_at = ?, last_error = ?, "
        "last_error_name = ?, claim_alone = NULL "
        f"WHERE {table.key} = ? AND generation_id = ? AND status = 'pending' AND attempt = ? "
        f"RETURNING {table.key}",
        "failed" if terminal else "pending",
        next_attempt_at,
        error.message,
        error.name,
        key,
        generation,
        attempt,
    ).to_list()
    if not rows:
        return False
    _keep_stack(sql, table, key, generation, error.stack)
    return True


def _keep_stack(
    sql: SqlStorage, table: TableSpec, key: str, generation: str, stack: str | None
) -> None:
    """Store `stack` as the traceback of the record's last error (none: forget the old one)."""
    if stack is None:
        forget_stack(sql, table, key)
        return
    sql.exec(
        "INSERT INTO durability_error_stacks (record_table, record_key, generation_id, stack) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (record_table, record_key) DO UPDATE SET "
        "generation_id = excluded.generation_id, stack = excluded.stack",
        table.name,
        key,
        generation,
        stack,
    )


def forget_stack(sql: SqlStorage, table: TableSpec, key: str) -> None:
    """Drop the traceback stored for record `key` (its last error was replaced or cleared)."""
    sql.exec(
        "DELETE FROM durability_error_stacks WHERE record_table = ? AND record_key = ?",
        table.name,
        key,
    )


def read_stack(sql: SqlStorage, table: TableSpec, key: str, generation: str) -> str | None:
    """The traceback stored with the last error of the record's `generation`, if any."""
    rows = sql.exec(
        "SELECT stack FROM durability_error_stacks "
        "WHERE record_table = ? AND record_key = ? AND generation_id = ?",
        table.name,
        key,
        generation,
    ).to_list()
    return str(rows[0]["stack"]) if rows else None


def pending_head(sql: SqlStorage, table: TableSpec, limit: int) -> list[tuple[str, int]]:
    """The `limit` earliest pending rows as `(key, next_attempt_at)`, running ones included."""
    cursor = sql.exec(
        f"SELECT {table.key}, next_attempt_at FROM {table.name} "
        "WHERE status = 'pending' ORDER BY next_attempt_at ASC LIMIT ?",
        limit,
    )
    # Raw rows (tuples): a reconcile reads one more row than there are keys running.
    return [(str(key), int(at)) for key, at in cursor.raw()]


def due_rows(
    sql: SqlStorage, table: TableSpec, columns: str, now: int, limit: int
) -> list[tuple[Any, ...]]:
    """`columns` (fixed identifiers) of at most `limit` pending rows due at `now`, earliest
    first."""
    return list(
        sql.exec(
            f"SELECT {columns} FROM {table.name} "
            "WHERE status = 'pending' AND next_attempt_at <= ? "
            "ORDER BY next_attempt_at ASC LIMIT ?",
            now,
            limit,
        ).raw()
    )


def purge_created_before(sql: SqlStorage, table: TableSpec, before: int) -> int:
    """Delete every row created strictly before `before`; the number deleted.

    Tracebacks whose record is gone (purged now, or deleted some other way) go too.
    """
    count = int(
        sql.exec(f"SELECT COUNT(*) AS count FROM {table.name} WHERE created_at < ?", before).one()[
            "count"
        ]
    )
    if count:
        sql.exec(f"DELETE FROM {table.name} WHERE created_at < ?", before)
    sql.exec(
        "DELETE FROM durability_error_stacks WHERE record_table = ? "
        f"AND record_key NOT IN (SELECT {table.key} FROM {table.name})",
        table.name,
    )
    return count


BATCH_SHAPES = (1, 4, 16, 32)
"""The row counts a set-based statement is padded to (with NULL rows that match nothing),
so it has few distinct texts: SQLite compiles each once, and the statement cache is small."""


MAX_BATCH_ROWS = BATCH_SHAPES[-1]
"""Rows one padded statement names at most: callers chunk their rows by it."""


_PADDED = tuple(
    next(size for size in BATCH_SHAPES if size >= count) for count in range(MAX_BATCH_ROWS + 1)
)
"""The smallest of `BATCH_SHAPES` that holds each row count, by count."""


def padded_bindings(rows: Sequence[Sequence[SqlValue]], width: int) -> tuple[int, list[SqlValue]]:
    """The padded row count of `rows` (at most `MAX_BATCH_ROWS`) and their bindings, NULL
    rows (which match nothing) filling the shape up."""
    size = _PADDED[len(rows)]
    bindings: list[SqlValue] = list(chain.from_iterable(rows))
    bindings.extend([None] * (width * (size - len(rows))))
    return size, bindings


@functools.cache
def value_rows(width: int, count: int) -> str:
    """`(?, ?, ...), ...`: `count` rows of `width` placeholders for a VALUES list."""
    row = "(" + ", ".join("?" * width) + ")"
    return ", ".join([row] * count)


def claim_attempts(
    sql: SqlStorage,
    table: TableSpec,
    rows: Sequence[tuple[str, str, int]],
    now: int,
    alone: bool = False,
) -> set[str]:
    """`claim_attempt` for many `(key, generation, seen)` rows with one statement per 32
    (3 bindings each, under the 100 a query may have); the keys whose claim won (each
    such row's attempt is then `seen + 1`)."""
    won: set[str] = set()
    for first in range(0, len(rows), MAX_BATCH_ROWS):
        size, bindings = padded_bindings(rows[first : first + MAX_BATCH_ROWS], 3)
        query = _claim_statement(table.name, table.key, size, 1 if alone else 0)
        cursor = sql.exec(query, *bindings, now)
        won.update([row[0] for row in cursor.raw()])
    return won


@functools.cache
def _claim_statement(name: str, key: str, size: int, alone: int) -> str:
    """The claim of `size` rows: a join on the primary key (each row looked up once)."""
    return (
        f"WITH c(k, g, a) AS (VALUES {value_rows(3, size)}) "
        f"UPDATE {name} SET attempt = attempt + 1, claim_alone = {alone}, {_REQUEUED} FROM c "
        f"WHERE {name}.{key} = c.k AND {name}.generation_id = c.g AND {name}.attempt = c.a "
        f"AND +{name}.status = 'pending' AND +{name}.next_attempt_at <= ? "
        f"AND {_CLAIMABLE.format(name=name)} RETURNING {name}.{key}"
    )
