"""Claims and removals of delivery rows, fenced on each row's generation and attempt.

Each runs inside one transaction of the caller. A statement names up to 48 rows of one
attempt as `(id = ? AND +generation_id = ?) OR ...`, their shared attempt bound once:
SQLite seeks each row by primary key (a multi-index OR, which keeps the matches in a
row set), cheaper than joining a `VALUES` list, which it materializes into a temporary
table first. A row that changed since it was read is left alone, and the caller learns
(RETURNING) which rows were written. Statements stay under the Workers limit of 100
bound parameters and are padded to a few row counts (`SHAPES`), so SQLite compiles
few distinct texts; a padding row of NULLs matches nothing.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterator, Sequence

from .._context import SqlStorage
from .._types import SqlValue
from .rows import Delivery

SHAPES = (1, 4, 16, 48)
"""The row counts a fenced statement is padded to."""

ROWS_PER_STATEMENT = SHAPES[-1]
"""Rows one fenced statement names at most (2 bindings each, plus at most 4 more)."""


def _padded(count: int) -> int:
    """The smallest of `SHAPES` that holds `count` rows."""
    return next(size for size in SHAPES if size >= count)


@functools.cache
def _matches(column: str, size: int) -> str:
    """`(column = ? AND +generation_id = ?) OR ...` for `size` rows (the unary `+`
    keeps SQLite on the key's index)."""
    return " OR ".join([f"({column} = ? AND +generation_id = ?)"] * size)


@functools.cache
def claim_statement(size: int) -> str:
    """The claim of `size` rows at one attempt (bindings: lease end, alone, each row's id
    and generation, the attempt, the attempt limit).

    `+attempt` keeps SQLite on the primary key (the due index holds `attempt`, which
    the statement writes)."""
    return (
        "UPDATE durability_fanout_deliveries SET attempt = attempt + 1, next_attempt_at = ?, "
        f"claim_alone = ? WHERE ({_matches('id', size)}) AND +attempt = ? "
        "AND +phase = 'delivery' AND attempt - spared < ? AND claim_alone IS NULL RETURNING id"
    )


@functools.cache
def remove_statement(size: int) -> str:
    """The deletion of `size` rows at one attempt (bindings: each row's id and
    generation, the attempt)."""
    return (
        f"DELETE FROM durability_fanout_deliveries WHERE ({_matches('id', size)}) "
        "AND +attempt = ? RETURNING id"
    )


@functools.cache
def finish_statement(size: int) -> str:
    """The deletion of those of `size` manifests that no target owes once released by
    the same count (bindings: each key and generation, the count); the keys deleted."""
    return (
        f"DELETE FROM durability_fanout_messages WHERE ({_matches('key', size)}) "
        "AND remaining <= ? RETURNING key"
    )


@functools.cache
def release_statement(size: int) -> str:
    """Count `size` manifests as owed by that many targets fewer (bindings: the count,
    each key and generation)."""
    return (
        "UPDATE durability_fanout_messages SET remaining = remaining - ? "
        f"WHERE {_matches('key', size)}"
    )


def _statements(pairs: Sequence[tuple[str, str]]) -> Iterator[tuple[int, list[SqlValue]]]:
    """`pairs` (key, generation) in statements: each one's padded size and bindings."""
    for first in range(0, len(pairs), ROWS_PER_STATEMENT):
        chunk = pairs[first : first + ROWS_PER_STATEMENT]
        size = _padded(len(chunk))
        bindings: list[SqlValue] = [value for pair in chunk for value in pair]
        bindings += [None] * (2 * (size - len(chunk)))
        yield size, bindings


def _by_attempt(rows: Sequence[Delivery]) -> dict[int, list[tuple[str, str]]]:
    """The (id, generation) of each row, grouped by its attempt, in order."""
    groups: dict[int, list[tuple[str, str]]] = {}
    for row in rows:
        group = groups.get(row.attempt)
        if group is None:
            group = groups[row.attempt] = []
        group.append((row.id, row.generation))
    return groups


def claim_rows(
    sql: SqlStorage,
    rows: Sequence[Delivery],
    max_attempts: int,
    lease_until: int,
    alone: bool = False,
) -> list[Delivery]:
    """Count one more attempt of each row still as read (and within its limit), leased
    until `lease_until`, run `alone` or beside others; the claimed rows, in order."""
    won: set[str] = set()
    claim = 1 if alone else 0
    for attempt, pairs in _by_attempt(rows).items():
        for size, bindings in _statements(pairs):
            cursor = sql.exec(
                claim_statement(size), lease_until, claim, *bindings, attempt, max_attempts
            )
            won.update([found[0] for found in cursor.raw()])
    return [
        row.claimed(row.attempt + 1, claim, row.spared, row.interruptions)
        for row in rows
        if row.id in won
    ]


def claim_suspect_row(sql: SqlStorage, row: Delivery, lease_until: int) -> Delivery | None:
    """Claim, to run alone, a row whose last claimed attempt never settled (the process
    stopped or the object was evicted while it was delivered): that interruption is
    counted, and spared when that attempt ran beside others. `None` if the row changed
    since it was read. The caller checks the attempt limit first."""
    written = sql.exec(
        "UPDATE durability_fanout_deliveries SET attempt = attempt + 1, next_attempt_at = ?, "
        "spared = spared + 1 - claim_alone, claim_alone = 1, "
        "interruptions = interruptions + 1 WHERE id = ? AND generation_id = ? "
        "AND attempt = ? AND phase = 'delivery' AND claim_alone IS NOT NULL",
        lease_until,
        row.id,
        row.generation,
        row.attempt,
    ).rows_written
    if not written:
        return None
    assert row.claim_alone is not None
    spared = row.spared + 1 - row.claim_alone
    return row.claimed(row.attempt + 1, 1, spared, row.interruptions + 1)


def remove_rows(sql: SqlStorage, rows: Sequence[Delivery]) -> set[str]:
    """Delete each row still at its attempt and release the manifests; the removed ids."""
    removed: set[str] = set()
    for attempt, pairs in _by_attempt(rows).items():
        for size, bindings in _statements(pairs):
            cursor = sql.exec(remove_statement(size), *bindings, attempt)
            removed.update([found[0] for found in cursor.raw()])
    releases = Counter((row.message_key, row.generation) for row in rows if row.id in removed)
    by_count: dict[int, list[tuple[str, str]]] = {}
    for manifest, count in releases.items():
        by_count.setdefault(count, []).append(manifest)
    for count, manifests in by_count.items():
        _release(sql, manifests, count)
    return removed


def _release(sql: SqlStorage, manifests: Sequence[tuple[str, str]], count: int) -> None:
    """Release each manifest (key, generation) by `count` deliveries: deleted when no
    target owes it any more (which frees its key), else its count lowered."""
    finished: set[str] = set()
    for size, bindings in _statements(manifests):
        cursor = sql.exec(finish_statement(size), *bindings, count)
        finished.update([found[0] for found in cursor.raw()])
    owed = [manifest for manifest in manifests if manifest[0] not in finished]
    for size, bindings in _statements(owed):
        sql.exec(release_statement(size), count, *bindings)
