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
from collections.abc import Awaitable, Callable, Mapping

from .._clock import now_ms
from .._context import SqlStorage
from .._engine import (
    Attempt,
    AttemptKind,
    Engine,
    Reservation,
    TurnBatch,
    report_failure,
)
from .inserts import (
    NONE_CLAIMED,
    ReadAfterInsertError,
    Registration,
    insert_calls,
    one_statement,
)

KindOf = Callable[[str], AttemptKind]
"""What every attempt of an operation shares, by the operation's name."""


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
        claimed = NONE_CLAIMED if claims is None else claims.claims()
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
            if one_statement(rows, claimed):
                return insert_calls(sql, rows, claimed)
            # Several statements: a later one failing must undo the earlier ones too.
            return self._engine.transaction_sync(lambda _: insert_calls(sql, rows, claimed))
        except ReadAfterInsertError as failed:
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


def _inserting(row: Registration, claim: int | None) -> Callable[[SqlStorage], bool | Exception]:
    """The write of one registration by itself (in a savepoint of its own)."""
    claims = NONE_CLAIMED if claim is None else {0: claim}
    return lambda sql: insert_calls(sql, [row], claims)[0]


def _earliest(rows: list[Registration], outcomes: list[bool | Exception]) -> int | None:
    """The earliest due time of the records the batch inserted (`None`: it inserted none)."""
    if outcomes.count(True) == len(rows):
        return min(map(_DUE_AT, rows))
    due = [row[3] for row, outcome in zip(rows, outcomes, strict=True) if outcome is True]
    return min(due) if due else None


_DUE_AT: Callable[[Registration], int] = operator.itemgetter(3)
"""A registration's due time."""
