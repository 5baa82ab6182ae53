"""Registrations of one loop turn, written with one multi-row INSERT.

A new record due now is inserted claimed (`Reservation`), so its one commit makes the
record and its first claim durable: its handler starts right after it when a permit is
free, else as soon as one is, with no further commit.

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
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from itertools import chain

from .._clock import now_ms
from .._context import SqlStorage
from .._engine import (
    Attempt,
    AttemptKind,
    Engine,
    Reservation,
    TurnBatch,
    padded_bindings,
    report_failure,
    value_rows,
)
from .._errors import DuplicateDurableCallError

Registration = tuple[str, str, str, int, str, int]
"""A new record: id, operation, payload text, due time, generation, creation time."""

KindOf = Callable[[str], AttemptKind]
"""What every attempt of an operation shares, by the operation's name."""

_INSERT_CHUNK = 16
"""Rows one INSERT names at most (6 bindings each, under the 100 a query may have)."""
_ALIKE_CHUNK = 32
"""Rows one INSERT names at most when they share their operation, due time and creation
time, as a turn's registrations of one operation usually do (3 bindings each, and 3 for
the statement: 99)."""

_INSERT = (
    "INSERT INTO durability_calls (id, operation, payload, status, attempt, next_attempt_at, "
    "generation_id, created_at, claim_alone) SELECT column1, column2, column3, 'pending', "
    "{attempt}, column4, column5, column6, {claim} FROM (VALUES {rows}) "
    "WHERE column1 IS NOT NULL ON CONFLICT(id) DO NOTHING{returning}"
)
"""The insert of new records: `attempt` 0 and no claim, or 1 and `claim_alone` for
records inserted with their first attempt claimed (what a claim of a new record would
leave)."""

_INSERT_ALIKE = (
    "INSERT INTO durability_calls (id, operation, payload, status, attempt, next_attempt_at, "
    "generation_id, created_at, claim_alone) SELECT column1, ?, column2, 'pending', "
    "{attempt}, ?, column3, ?, {claim} FROM (VALUES {rows}) "
    "WHERE column1 IS NOT NULL ON CONFLICT(id) DO NOTHING{returning}"
)
"""`_INSERT` for rows sharing their operation, due time and creation time (bound once,
before the rows: their marks come first in the text)."""

COUNTED_ROWS = 4
"""Chunks of at least this many rows are inserted or completed without ``RETURNING`` and
counted with ``changes()``: one small statement costs less than a returned row each."""


class Registrations:
    """The registrations of one loop turn, written in one transaction (a `TurnBatch`),
    and the start of those due now.

    Before the write, the records due now take their keys and the permits free now (a
    `Reservation`), so the write inserts them claimed; once the commit is durable, the
    callers learn their outcomes, `registered` is told which registrations inserted a new
    record, the claimed ones run (as permits come), and other new records due now start
    as far as permits are free.
    """

    __slots__ = ("_batch", "_engine", "_kind_of", "_registered", "_run_started", "_start", "add")

    def __init__(
        self,
        engine: Engine,
        *,
        kind_of: KindOf,
        registered: Callable[[list[Registration]], None],
        start: Callable[[list[Attempt]], None],
        run_started: Callable[[Awaitable[None], str, str], None],
    ) -> None:
        self._engine = engine
        self._kind_of = kind_of
        self._registered = registered
        self._start = start
        self._run_started = run_started
        self._batch: TurnBatch[Registration, bool] = TurnBatch(
            self._flush, engine.tasks.spawn, "registration"
        )
        self.add: Callable[[Registration], asyncio.Future[bool]] = self._batch.add
        """Queue a registration for this turn's write; the future tells, once it is
        durable, whether it inserted a new record (or raises what it alone met). The
        write runs as instance work: a host that refuses it refuses this call."""

    async def _flush(
        self, rows: list[Registration]
    ) -> tuple[list[bool | Exception], Callable[[], None] | None]:
        """Write `rows`; their outcomes once durable, and what follows once the callers
        have them (the hook told, the records claimed with them run): a caller's reply
        then leaves before its handler writes, so it does not wait for that commit."""
        claims: Reservation | None = None
        try:
            claims = self._reserve(rows)
            outcomes = await self.write(rows, claims)
            await self._engine.storage.sync()
        except BaseException:
            if claims is not None:
                claims.release()
            raise
        inserted = (
            rows
            if outcomes.count(True) == len(rows)
            else [row for row, outcome in zip(rows, outcomes, strict=True) if outcome is True]
        )
        if inserted or claims is not None:
            return outcomes, functools.partial(self._after_answers, inserted, claims)
        return outcomes, None

    def _after_answers(self, inserted: list[Registration], claims: Reservation | None) -> None:
        """`_written`, once the callers are answered: a failure is reported (the records
        are durable: the alarm runs them), and the permits and keys it held given back."""
        try:
            self._written(inserted, claims)
        except Exception as error:
            if claims is not None:
                claims.release()
            details = {"operation": inserted[0][1], "id": inserted[0][0]} if inserted else {}
            report_failure("durability.background_execution.failed", details, error)

    def _reserve(self, rows: list[Registration]) -> Reservation | None:
        """Before a batch's write: keys (and the permits free now) for its records due
        now, so the write claims them too."""
        return self._engine.runner.reserve(*self._firsts_due(rows, now_ms())) or None

    def _firsts_due(self, rows: list[Registration], now: int) -> tuple[list[Attempt], list[int]]:
        """The attempt of each row due at `now` that is the first of its key in `rows`,
        and the position of each in `rows`."""
        due: list[Attempt] = []
        positions: list[int] = []
        seen: set[str] = set()
        kind_of = self._kind_of
        last: str | None = None
        kind: AttemptKind  # set by the first row due
        for position, (key, operation, text, due_at, generation, created_at) in enumerate(rows):
            if key in seen:
                continue
            seen.add(key)
            if due_at <= now:
                if operation != last:  # a turn's rows are mostly of one operation
                    last, kind = operation, kind_of(operation)
                due.append(Attempt(kind, key, generation, created_at, 0, text))
                positions.append(position)
        return due, positions

    def _written(self, inserted: list[Registration], claims: Reservation | None) -> None:
        """After the commit of new records: tell `registered`, run those claimed with
        them, and start other ones due now as far as permits are free (a record a timer
        pass started meanwhile is left to it)."""
        free = self._engine.permits.free
        now = now_ms()
        if inserted:
            self._registered(inserted)
        unclaimed = free and (claims is None or not claims.all_claimed)
        due = self._unclaimed_due(inserted, claims, free, now) if unclaimed else None
        started = None if claims is None else claims.start()
        if started is not None:
            self._run_started(started, inserted[0][0], inserted[0][1])
        if due:
            self._start(due)

    def _unclaimed_due(
        self, inserted: list[Registration], claims: Reservation | None, free: int, now: int
    ) -> list[Attempt]:
        """The attempts of up to `free` new records due at `now` that `claims` does not
        hold."""
        due: list[Attempt] = []
        for key, operation, text, due_at, generation, created_at in inserted:
            if due_at <= now and (claims is None or key not in claims):
                kind = self._kind_of(operation)
                due.append(Attempt(kind, key, generation, created_at, 0, text))
                if len(due) == free:
                    break
        return due

    def write(
        self, rows: list[Registration], claims: Reservation | None = None
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
        self, sql: SqlStorage, rows: list[Registration], claims: Reservation | None
    ) -> list[bool | Exception]:
        claimed = _NONE_CLAIMED if claims is None else claims.claims()
        outcomes = self._insert(sql, rows, claimed)
        if claims is not None:
            written = outcomes.count(True)
            if written == len(rows):
                claims.claimed(None, written)  # every held record was inserted
            else:
                keys = [rows[index][0] for index in claimed if outcomes[index] is True]
                claims.claimed(keys, written)
        return outcomes

    def _insert(
        self, sql: SqlStorage, rows: list[Registration], claimed: Mapping[int, int]
    ) -> list[bool | Exception]:
        try:
            if len(rows) <= _INSERT_CHUNK and _one_claim(rows, claimed):
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
                write = _inserting(row, claimed.get(index))
                outcomes.append(self._engine.transaction_sync(write))
            except Exception as error:
                outcomes.append(error)
        return outcomes


_NONE_CLAIMED: Mapping[int, int] = {}
"""The claims of a write without claims."""


def _one_claim(rows: list[Registration], claimed: Mapping[int, int]) -> bool:
    """Whether every row of `rows` is inserted with the same claim (one statement)."""
    if not claimed:
        return True
    return len(claimed) == len(rows) and len(set(claimed.values())) == 1


def _inserting(row: Registration, claim: int | None) -> Callable[[SqlStorage], bool | Exception]:
    """The write of one registration by itself (in a savepoint of its own)."""
    claims = _NONE_CLAIMED if claim is None else {0: claim}
    return lambda sql: insert_calls(sql, [row], claims)[0]


def _earliest(rows: list[Registration], outcomes: list[bool | Exception]) -> int | None:
    """The earliest due time of the records the batch inserted (`None`: it inserted none)."""
    if outcomes.count(True) == len(rows):
        return min(map(_DUE_AT, rows))
    due = [row[3] for row, outcome in zip(rows, outcomes, strict=True) if outcome is True]
    return min(due) if due else None


_DUE_AT: Callable[[Registration], int] = operator.itemgetter(3)
"""A registration's due time."""
_SHARED: Callable[[Registration], tuple[str, int, int]] = operator.itemgetter(1, 3, 5)
"""What a turn's registrations of one operation usually share: the operation, due time
and creation time (the bindings an alike insert names once)."""
_OWN: Callable[[Registration], tuple[str, str, str]] = operator.itemgetter(0, 2, 4)
"""A registration's own bindings in an alike insert: id, payload text, generation."""


def insert_calls(
    sql: SqlStorage, rows: Sequence[Registration], claimed: Mapping[int, int] = _NONE_CLAIMED
) -> list[bool | Exception]:
    """Insert `rows`, those at the positions `claimed` names with their first attempt
    claimed (with that `claim_alone`: 0 beside others, 1 alone, 2 ahead of its permit);
    per row True (inserted), False (the id is this operation's already) or
    `DuplicateDurableCallError` (it is another operation's).

    A claimed row is the first of its id in `rows`, so writing the claimed rows before
    the others gives every row the outcome writing them in order would. Each row's
    generation is fresh (a registration's is random): a statement that inserted only
    some of its rows tells which by the generations stored."""
    groups: dict[int | None, list[Registration]]
    if not claimed:
        groups = {None: list(rows)}
    elif _one_claim(list(rows), claimed):
        groups = {next(iter(claimed.values())): list(rows)}
    else:
        groups = {}
        for index, row in enumerate(rows):
            groups.setdefault(claimed.get(index), []).append(row)
        others = groups.pop(None, None)
        if others is not None:
            groups[None] = others  # after the claimed rows
    inserted: set[str] = set()
    for claim, group in groups.items():
        alike = set(map(_SHARED, group))
        shared = alike.pop() if len(alike) == 1 else None
        chunk = _INSERT_CHUNK if shared is None else _ALIKE_CHUNK
        for first in range(0, len(group), chunk):
            inserted.update(_insert_chunk(sql, claim, group[first : first + chunk], shared))
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


def _insert_chunk(
    sql: SqlStorage,
    claim: int | None,
    chunk: Sequence[Registration],
    shared: tuple[str, int, int] | None,
) -> Iterable[str]:
    """Insert the rows of one statement, claimed as `claim` says (`None`: not claimed, else
    its `claim_alone`); the ids they inserted. `shared`: what every row of `chunk` shares
    (`_SHARED`, bound once), or `None`."""
    alike = shared is not None
    if shared is None:
        size, bindings = padded_bindings(chunk, 6)
    else:
        size, bindings = padded_bindings(list(map(_OWN, chunk)), 3)
        bindings[0:0] = shared
    if len(chunk) < COUNTED_ROWS:
        # Each returned row is the 1-tuple of an inserted id.
        cursor = sql.exec(_insert_query(claim, size, True, alike), *bindings)
        return chain.from_iterable(cursor.raw())
    sql.exec(_insert_query(claim, size, False, alike), *bindings)
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
def _insert_query(claim: int | None, size: int, returning: bool, alike: bool) -> str:
    """`_INSERT` (`_INSERT_ALIKE` when `alike`) for `size` rows claimed as `claim` says,
    returning their ids or not (a few distinct texts)."""
    ending = " RETURNING id" if returning else ""
    return (_INSERT_ALIKE if alike else _INSERT).format(
        attempt=0 if claim is None else 1,
        claim="NULL" if claim is None else claim,
        rows=value_rows(3 if alike else 6, size),
        returning=ending,
    )


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
