"""Operation writes across records: registrations of one loop turn in one multi-row
INSERT, and the successes of a batch of attempts in one fenced UPDATE.

A new record due now is inserted claimed when a permit is free (`EagerClaims`), so its
one commit makes the record and its first claim durable and its handler starts right
after it.

Each registration still gets its own outcome, exactly as if it had been written alone:
the first registration of an id in the turn inserts it; a later one of the same id is a
silent no-op for the same operation and `DuplicateDurableCallError` for another. A row
that spoils the multi-row statement is written alone, so it fails by itself. A caller
learns its outcome only once the batch's commit is durable.
"""

from __future__ import annotations

import asyncio
import functools
import operator
from collections.abc import Awaitable, Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from itertools import chain
from typing import Any

from .._abandoned import abandoned_error
from .._context import SqlStorage
from .._engine import EagerClaims, Engine, ExecutionSpec, padded_bindings, value_rows
from .._errors import DuplicateDurableCallError, DurableResultSerializationError
from .._serialization import serialize
from .control import NULL_TEXT

Registration = tuple[str, str, str, int, str, int]
"""A new record: id, operation, payload text, due time, generation, creation time."""

Reserve = Callable[[list[Registration]], EagerClaims | None]
"""Before the write: the claims of the batch's records due now that permits allow."""

Written = Callable[[list[Registration], EagerClaims | None], None]
"""Told, after the commit, the registrations that inserted a new record (and the claims
to start or give back)."""

_INSERT_CHUNK = 16
"""Rows one INSERT names at most (6 bindings each, under the 100 a query may have)."""

_INSERT = (
    "INSERT INTO durability_calls (id, operation, payload, status, attempt, next_attempt_at, "
    "generation_id, created_at) SELECT column1, column2, column3, 'pending', {attempt}, "
    "column4, column5, column6 FROM (VALUES {rows}) WHERE column1 IS NOT NULL "
    "ON CONFLICT(id) DO NOTHING{returning}"
)
"""The insert of new records, `attempt` 0, or 1 for records inserted with their first
attempt claimed (what a claim of a new record would leave)."""

_COUNTED_ROWS = 4
"""Chunks of at least this many rows are inserted or completed without ``RETURNING`` and
counted with ``changes()``: one small statement costs less than a returned row each."""


class Pending:
    """The registrations one write task will take, and their callers' futures (in the
    same order)."""

    __slots__ = ("futures", "rows")

    def __init__(self) -> None:
        self.rows: list[Registration] = []
        self.futures: list[asyncio.Future[bool]] = []


class RegistrationBatch:
    """Collects the registrations of one loop turn and writes them in one transaction."""

    __slots__ = ("_engine", "_pending", "_reserve", "_written")

    def __init__(self, engine: Engine, written: Written, reserve: Reserve) -> None:
        self._engine = engine
        self._written = written
        self._reserve = reserve
        self._pending: Pending | None = None

    def add(self, registration: Registration) -> asyncio.Future[bool]:
        """Queue `registration` for this turn's write; the future tells, once it is
        durable, whether it inserted a new record (or raises what it alone met)."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        pending = self._pending
        if pending is None:
            pending = Pending()
            # The write runs as instance work; a host that refuses it refuses this call.
            task = self._engine.tasks.spawn(self._flush(pending))
            task.add_done_callback(functools.partial(self._unstarted, pending))
            self._pending = pending
        pending.rows.append(registration)
        pending.futures.append(future)
        return future

    def _unstarted(self, batch: Pending, task: asyncio.Task[None]) -> None:
        """Answer the callers of a write task cancelled before it ever ran (once it runs,
        it answers them itself), and let the next registration start a new batch."""
        if self._pending is batch:
            self._pending = None
        if not task.cancelled() or all(future.done() for future in batch.futures):
            return
        answer = abandoned_error(self._engine.tasks.spawn, "registration")
        for future in batch.futures:
            if not future.done():
                future.set_exception(answer)

    async def _flush(self, batch: Pending) -> None:
        if self._pending is batch:
            self._pending = None
        rows, futures = batch.rows, batch.futures
        claims: EagerClaims | None = None
        try:
            claims = self._reserve(rows)
            outcomes = await self.write(rows, claims)
            await self._engine.storage.sync()
        except BaseException as error:
            if claims is not None:
                claims.release()
            # Cancelled under its callers (eviction): they get a definite error instead.
            answer = (
                error
                if isinstance(error, Exception)
                else abandoned_error(self._engine.tasks.spawn, "registration")
            )
            for future in futures:
                if not future.done():
                    future.set_exception(answer)
            if isinstance(error, Exception):
                return  # every caller raises it
            raise
        for future, outcome in zip(futures, outcomes, strict=True):
            if future.done():
                continue
            if outcome is True or outcome is False:
                future.set_result(outcome)
            else:
                future.set_exception(outcome)
        inserted = (
            rows
            if outcomes.count(True) == len(rows)
            else [row for row, outcome in zip(rows, outcomes, strict=True) if outcome is True]
        )
        if inserted or claims is not None:
            self._written(inserted, claims)

    def write(
        self, rows: list[Registration], claims: EagerClaims | None = None
    ) -> Awaitable[list[bool | Exception]]:
        """Insert `rows` (those `claims` reserved claimed), and reconcile the alarm in one
        transaction (not yet durable): the outcome of each row, as `insert_calls`
        gives it."""
        return self._engine.transaction(
            lambda sql: self._write(sql, rows, claims),
            due_at=lambda found: _earliest(rows, found),
            timed=lambda _: claims is None or not claims.all_claimed,
        )

    def _write(
        self, sql: SqlStorage, rows: list[Registration], claims: EagerClaims | None
    ) -> list[bool | Exception]:
        claimed = _NONE_CLAIMED if claims is None else claims.first_attempts()
        outcomes = self._insert(sql, rows, claimed)
        if claims is not None:
            keys = [rows[index][0] for index in claimed if outcomes[index] is True]
            claims.claimed(keys, outcomes.count(True))
        return outcomes

    def _insert(
        self, sql: SqlStorage, rows: list[Registration], claimed: AbstractSet[int]
    ) -> list[bool | Exception]:
        try:
            if len(rows) <= _INSERT_CHUNK and len(claimed) in (0, len(rows)):
                return insert_calls(sql, rows, claimed)
            # Several statements: a later one failing must undo the earlier ones too.
            return self._engine.transaction_sync(lambda _: insert_calls(sql, rows, claimed))
        except _ReadAfterInsertError as failed:
            raise failed.error from None  # the whole batch fails (its transaction is undone)
        except Exception:
            pass  # one row spoilt the statement: write each alone, so only it fails
        outcomes: list[bool | Exception] = []
        for index, row in enumerate(rows):
            try:
                outcomes.append(self._engine.transaction_sync(_inserting(row, index in claimed)))
            except Exception as error:
                outcomes.append(error)
        return outcomes


_NONE_CLAIMED: frozenset[int] = frozenset()
"""The positions claimed in a write without claims."""

_FIRST_CLAIMED = frozenset({0})
"""The positions claimed in the write of one claimed row."""


def _inserting(row: Registration, claimed: bool) -> Callable[[SqlStorage], bool | Exception]:
    """The write of one registration alone (in a savepoint of its own)."""
    return lambda sql: insert_calls(sql, [row], _FIRST_CLAIMED if claimed else _NONE_CLAIMED)[0]


def _earliest(rows: list[Registration], outcomes: list[bool | Exception]) -> int | None:
    """The earliest due time of the records the batch inserted (`None`: it inserted none)."""
    if outcomes.count(True) == len(rows):
        return min(map(_DUE_AT, rows))
    due = [row[3] for row, outcome in zip(rows, outcomes, strict=True) if outcome is True]
    return min(due) if due else None


_DUE_AT: Callable[[Registration], int] = operator.itemgetter(3)
"""A registration's due time."""


def insert_calls(
    sql: SqlStorage, rows: Sequence[Registration], claimed: AbstractSet[int]
) -> list[bool | Exception]:
    """Insert `rows` (those at the indexes `claimed` with their first attempt claimed);
    per row True (inserted), False (the id is this operation's already) or
    `DuplicateDurableCallError` (it is another operation's).

    A claimed row is the first of its id in `rows`, so writing the claimed rows before
    the others gives every row the outcome writing them in order would. Each row's
    generation is fresh (a registration's is random): a statement that inserted only
    some of its rows tells which by the generations stored."""
    if not claimed:
        firsts: Sequence[Registration] = ()
        others = rows
    elif len(claimed) == len(rows):
        firsts, others = rows, ()
    else:
        firsts = [row for index, row in enumerate(rows) if index in claimed]
        others = [row for index, row in enumerate(rows) if index not in claimed]
    inserted: set[str] = set()
    for attempt, group in ((1, firsts), (0, others)):
        for first in range(0, len(group), _INSERT_CHUNK):
            inserted.update(_insert_chunk(sql, attempt, group[first : first + _INSERT_CHUNK]))
    if len(inserted) == len(rows):
        return [True] * len(rows)  # every row inserted its own id
    outcomes: list[bool | Exception] = []
    for row in rows:
        key = row[0]
        if key in inserted:
            inserted.discard(key)  # a later registration of the id in this batch is not new
            outcomes.append(True)
            continue
        operation = _operation_of(sql, key)
        if operation is None:
            outcomes.append(RuntimeError(f'Durable call "{key}" was not persisted'))
        elif operation != row[1]:
            outcomes.append(DuplicateDurableCallError(key, operation, row[1]))
        else:
            outcomes.append(False)
    return outcomes


def _insert_chunk(sql: SqlStorage, attempt: int, chunk: Sequence[Registration]) -> Iterable[str]:
    """Insert the rows of one statement with `attempt`; the ids they inserted."""
    size, bindings = padded_bindings(chunk, 6)
    if len(chunk) < _COUNTED_ROWS:
        # Each returned row is the 1-tuple of an inserted id.
        return chain.from_iterable(sql.exec(_insert_query(attempt, size, True), *bindings).raw())
    sql.exec(_insert_query(attempt, size, False), *bindings)
    # Nothing else runs on the connection between these synchronous statements, and
    # changes() counts the INSERT's own rows (not a trigger's).
    try:
        for (count,) in sql.exec("SELECT changes()").raw():
            if count == len(chunk):
                return [row[0] for row in chunk]
            if count == 0:
                return ()
        return _written_by(sql, chunk)
    except Exception as error:
        raise _ReadAfterInsertError(error) from error


class _ReadAfterInsertError(Exception):
    """A read after a chunk's insert failed: the rows are written already, so a retry
    row by row would find them; the batch fails whole instead."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _written_by(sql: SqlStorage, chunk: Sequence[Registration]) -> list[str]:
    """The ids of `chunk` whose stored record one of its rows wrote: each registration has
    a fresh random generation, so the stored generation tells which row wrote a record."""
    written = {(row[0], row[4]) for row in chunk}
    stored = sql.exec(_stored_query(len(chunk)), *(row[0] for row in chunk)).raw()
    return [key for key, generation in stored if (key, generation) in written]


@functools.cache
def _insert_query(attempt: int, size: int, returning: bool) -> str:
    """`_INSERT` for `size` rows inserted with `attempt`, returning their ids or not (a
    few distinct texts)."""
    ending = " RETURNING id" if returning else ""
    return _INSERT.format(attempt=attempt, rows=value_rows(6, size), returning=ending)


@functools.cache
def _stored_query(size: int) -> str:
    """The id and generation of the records of `size` ids."""
    marks = ", ".join("?" * size)
    return f"SELECT id, generation_id FROM durability_calls WHERE id IN ({marks})"


def _operation_of(sql: SqlStorage, key: str) -> str | None:
    """The stored operation of record `key`, or `None` when there is none."""
    for row in sql.exec("SELECT operation FROM durability_calls WHERE id = ?", key).raw():
        return str(row[0])
    return None


_COMPLETE_CHUNK = 16
"""Rows one completion names at most (4 bindings each, under the 100 a query may have)."""

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
    sql: SqlStorage, done: Sequence[tuple[ExecutionSpec, int, Any]], completed_at: int
) -> list[int | Exception | None]:
    """Store the results of many successful attempts, each fenced as `complete_call` is;
    per row `completed_at`, `None` (a cancel, retry or purge got there first) or
    `DurableResultSerializationError` (not JSON: nothing stored for it)."""
    outcomes: list[int | Exception | None] = [None] * len(done)
    writes: list[tuple[int, str, str, int, str]] = []
    for index, (spec, attempt, result) in enumerate(done):
        try:
            text = NULL_TEXT if result is None else serialize(result, "result")
        except (TypeError, ValueError) as error:
            failure = DurableResultSerializationError(spec.name)
            failure.__cause__ = error
            outcomes[index] = failure
            continue
        writes.append((index, spec.key, spec.generation, attempt, text))
    for first in range(0, len(writes), _COMPLETE_CHUNK):
        chunk = writes[first : first + _COMPLETE_CHUNK]
        for index in _completed(sql, chunk, completed_at):
            outcomes[index] = completed_at
    return outcomes


def _completed(
    sql: SqlStorage, chunk: Sequence[tuple[int, str, str, int, str]], completed_at: int
) -> Iterable[int]:
    """Complete the `(index, key, generation, attempt, text)` rows of one statement; the
    indexes of those whose completion won."""
    counted = len(chunk) >= _COUNTED_ROWS
    text = chunk[0][4]
    if all(write[4] == text for write in chunk):
        size, bindings = padded_bindings([write[1:4] for write in chunk], 3)
        query = _complete_query(True, size, not counted)
        cursor = sql.exec(query, *bindings, completed_at, text)
    else:
        size, bindings = padded_bindings([write[1:] for write in chunk], 4)
        cursor = sql.exec(_complete_query(False, size, not counted), *bindings, completed_at)
    if not counted:
        won = {row[0] for row in cursor.raw()}
        return [write[0] for write in chunk if write[1] in won]
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
