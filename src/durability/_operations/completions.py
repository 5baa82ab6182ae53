"""The successes of a batch of operation attempts, stored with one fenced UPDATE per
16 records (32 when they all store the same result, as handlers returning nothing do).

Each completion is fenced as a single one is (`control.complete_call`): it names the
record's id, generation and attempt and `status = 'pending'`, so a cancel, retry or
purge that got there first wins. Fewer than `COUNTED_ROWS` records are one statement
returning the ids it completed, atomic by itself; more are chunked in a savepoint, and
chunks of at least `COUNTED_ROWS` records counted with ``changes()`` instead (a returned
row costs more than the count's read).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable, Sequence

from .._context import SqlCursor, SqlStorage
from .._engine import Done, Engine, padded_bindings, value_rows
from .._errors import DurableResultSerializationError
from .._serialization import serialize
from .control import NULL_TEXT
from .inserts import COUNTED_ROWS

_COMPLETE_CHUNK = 16
"""Rows one completion names at most (4 bindings each, under the 100 a query may have)."""
_ALIKE_CHUNK = 32
"""Rows one completion names at most when every row stores the same result (3 bindings
each, and 2 for the statement: 98)."""

_COMPLETE = (
    "WITH c(k, g, a, r) AS (VALUES {rows}) "
    "UPDATE durability_calls SET status = 'completed', completed_at = ?, result = c.r FROM c "
    "WHERE durability_calls.id = c.k AND durability_calls.generation_id = c.g "
    "AND durability_calls.attempt = c.a AND +durability_calls.status = 'pending'{returning}"
)

_COMPLETE_ALIKE = (
    "WITH c(k, g, a) AS (VALUES {rows}) "
    "UPDATE durability_calls SET status = 'completed', completed_at = ?, result = ? FROM c "
    "WHERE durability_calls.id = c.k AND durability_calls.generation_id = c.g "
    "AND durability_calls.attempt = c.a AND +durability_calls.status = 'pending'{returning}"
)
"""`_COMPLETE` for rows that all store the same result (bound once)."""


def complete_calls(
    engine: Engine, done: Sequence[Done], completed_at: int
) -> list[int | Exception | None]:
    """Store the results of many successful attempts, each fenced as `complete_call` is;
    per row `completed_at`, `None` (a cancel, retry or purge got there first) or
    `DurableResultSerializationError` (not JSON: nothing stored for it). Writes nothing
    when it raises: one statement returning its ids for a few rows, else a savepoint
    around the counted chunks."""
    outcomes: list[int | Exception | None] = [None] * len(done)
    writes: list[tuple[int, str, str, int, str]] = []
    for index, (attempt, number, result) in enumerate(done):
        try:
            text = NULL_TEXT if result is None else serialize(result, "result")
        except (TypeError, ValueError) as error:
            failure = DurableResultSerializationError(attempt.kind.name)
            failure.__cause__ = error
            outcomes[index] = failure
            continue
        writes.append((index, attempt.key, attempt.generation, number, text))
    if len(writes) < COUNTED_ROWS:
        won = _returned(engine.sql, writes, completed_at) if writes else ()
    else:
        # A savepoint: a counted chunk reads after its write, and a failing read (or a
        # later chunk) must undo the writes before the one-by-one retry.
        won = engine.transaction_sync(lambda sql: _chunks(sql, writes, completed_at))
    for index in won:
        outcomes[index] = completed_at
    return outcomes


def _chunks(
    sql: SqlStorage, writes: list[tuple[int, str, str, int, str]], completed_at: int
) -> list[int]:
    """Complete `writes` in statements of up to 16 rows (32 when they all store the same
    result); the indexes of those that won."""
    chunk = _ALIKE_CHUNK if len(set(map(_TEXT, writes))) == 1 else _COMPLETE_CHUNK
    won: list[int] = []
    for first in range(0, len(writes), chunk):
        won.extend(_completed(sql, writes[first : first + chunk], completed_at))
    return won


def _returned(
    sql: SqlStorage, chunk: Sequence[tuple[int, str, str, int, str]], completed_at: int
) -> list[int]:
    """Complete the rows of one statement, returning the ids it completed (no read after
    it, so a failure leaves nothing written); the indexes of those that won."""
    cursor = _complete(sql, chunk, completed_at, True)
    won = {row[0] for row in cursor.raw()}
    if len(won) == len(chunk):
        return [write[0] for write in chunk]
    return [write[0] for write in chunk if write[1] in won]


def _complete(
    sql: SqlStorage,
    chunk: Sequence[tuple[int, str, str, int, str]],
    completed_at: int,
    returning: bool,
) -> SqlCursor:
    """Run the completion of the `(index, key, generation, attempt, text)` rows of one
    statement (one result bound once when they all store the same)."""
    texts = set(map(_TEXT, chunk))
    if len(texts) == 1:
        size, bindings = padded_bindings(list(map(_ROW, chunk)), 3)
        return sql.exec(
            _complete_query(True, size, returning), *bindings, completed_at, texts.pop()
        )
    size, bindings = padded_bindings([write[1:] for write in chunk], 4)
    return sql.exec(_complete_query(False, size, returning), *bindings, completed_at)


_TEXT: Callable[[tuple[int, str, str, int, str]], str] = operator.itemgetter(4)
"""A write's result text."""
_ROW: Callable[[tuple[int, str, str, int, str]], tuple[str, str, int]] = operator.itemgetter(
    1, 2, 3
)
"""A write's key, generation and attempt (its bindings when every result is alike)."""


def _completed(
    sql: SqlStorage, chunk: Sequence[tuple[int, str, str, int, str]], completed_at: int
) -> Iterable[int]:
    """Complete the `(index, key, generation, attempt, text)` rows of one statement in a
    savepoint; the indexes of those whose completion won."""
    if len(chunk) < COUNTED_ROWS:
        return _returned(sql, chunk, completed_at)
    _complete(sql, chunk, completed_at, False)
    for (count,) in sql.exec("SELECT changes()").raw():
        if count == len(chunk):
            return [write[0] for write in chunk]
        if count == 0:
            return ()
    return _won_completions(sql, chunk, completed_at)


def _won_completions(
    sql: SqlStorage, chunk: Sequence[tuple[int, str, str, int, str]], completed_at: int
) -> list[int]:
    """The indexes of `chunk` whose record is now completed at `completed_at` by that
    generation and attempt. That tells this statement's wins apart because an attempt
    is completed only by its own execution, which holds the record's key until it has
    stored its outcome (so no record of `chunk` was completed so before)."""
    stored = {
        (key, generation, attempt)
        for key, generation, attempt in sql.exec(
            _completed_query(len(chunk)), completed_at, *(write[1] for write in chunk)
        ).raw()
    }
    return [write[0] for write in chunk if (write[1], write[2], write[3]) in stored]


@functools.cache
def _complete_query(alike: bool, size: int, returning: bool) -> str:
    """The completion of `size` rows (one result for all when `alike`), returning the
    completed ids or not (a few distinct texts)."""
    ending = " RETURNING durability_calls.id" if returning else ""
    if alike:
        return _COMPLETE_ALIKE.format(rows=value_rows(3, size), returning=ending)
    return _COMPLETE.format(rows=value_rows(4, size), returning=ending)


@functools.cache
def _completed_query(size: int) -> str:
    """The id, generation and attempt of those of `size` ids completed at a time."""
    marks = ", ".join("?" * size)
    return (
        "SELECT id, generation_id, attempt FROM durability_calls "
        f"WHERE status = 'completed' AND completed_at = ? AND id IN ({marks})"
    )
