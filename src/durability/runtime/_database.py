"""One object's SQLite database: its connection and the transaction of the current turn.

Every storage call of a turn joins one `BEGIN IMMEDIATE` transaction; its `COMMIT` is
scheduled with `loop.call_soon`, so it runs once the turn (and every other turn already
queued) has finished, and all their writes share one commit and one fsync. Callers
wait on the commit future before releasing a result: the output gate.

Given a committer (`CommitThreads`: the runtime passes one on the real clock), SQLite
writes the log without syncing it (`synchronous=NORMAL`) and this class makes the sync
SQLite's `FULL` would make after each commit: the `COMMIT` runs on the loop (it only
hands pages to the OS), the connection is free for the next transaction at once, and
commit futures end in order when a sync that began after their `COMMIT` has ended (one
sync covers every commit made before it began). The sync runs on the loop when this
object syncs alone in the loop turn and syncs are quick, else in the committer's
threads beside other objects' (`CommitThreads.sync_round`). A commit that must write
the catalog first (an earlier wake time) or the first one of a connection (SQLite syncs
a new log's header and directory) runs whole in a worker; until it has ended, the
connection is not touched from the loop. Without a committer (a virtual clock) every
commit runs on the loop with `FULL`, so runs stay deterministic.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sqlite3
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ._commit_threads import Commit, CommitThreads, Ticket
from ._sql import Cursor, first_keyword

if TYPE_CHECKING:
    from ._pool import OpenDatabases

FlushHook = Callable[[], None]
PrepareHook = Callable[["Database"], "tuple[FlushHook | None, object]"]
"""Called before a commit that changes the alarm: work (a catalog write) that must be
durable before the `COMMIT`, if any, run in the same place as the commit; and what the
`CommitHook` gets once the commit is durable."""
CommitHook = Callable[["Database", object], None]
FailureHook = Callable[["Database", BaseException], None]

_SAVEPOINT_NAMES = tuple(f"_durability_sp{depth}" for depth in range(16))
"""Savepoints are named by nesting depth, so the same few statements are reused from
SQLite's statement cache (a new name per savepoint would compile each one anew)."""


@dataclass(frozen=True, slots=True)
class Savepoint:
    """A savepoint's name and the transaction (commit future) it belongs to."""

    name: str
    transaction: asyncio.Future[None]


_column_name = itemgetter(0)
"""The name of a column in a cursor's `description` (its first item)."""

UNREAD: Final = object()
"""`Database.alarm_row` before the alarm row was read, or after a rollback."""


class DatabaseClosedError(RuntimeError):
    """The database was closed (its object was evicted or the runtime closed)."""


class Database:
    """The SQLite connection of one object and its per-turn implicit transaction."""

    def __init__(
        self,
        connection: sqlite3.Connection,
        loop: asyncio.AbstractEventLoop,
        file: Path | None,
        committer: CommitThreads | None = None,
        *,
        created: bool = False,
    ) -> None:
        self.file = file
        self.created = created
        """The file was created in this run, by this object's first opening (so it is newer
        than the runtime's start); a later reopening of the same open object keeps it."""
        self.alarm_changed = False
        self.alarm_row: object = UNREAD
        """The alarm row as the open transaction sees it (kept by `_storage`)."""
        self.before_commit: PrepareHook | None = None
        self.after_commit: CommitHook | None = None
        self.commit_failed: FailureHook | None = None
        self.pool: OpenDatabases | None = None
        """Where a file's connection is counted (closed when idle, reopened on use)."""
        self.busy: Callable[[], bool] = _never
        """Whether a call or alarm is in progress on the object (its connection stays)."""
        self._connection: sqlite3.Connection | None = connection
        self._closed = False
        self._loop = loop
        self.pending_commit: asyncio.Future[None] | None = None
        """The commit future of the latest writes not yet durable, if there are any: the
        open transaction's, else the last committed one waiting for its sync (an
        attribute, not a property: every call's result reads it)."""
        self._transaction: asyncio.Future[None] | None = None
        self._prepared: object = _UNCHANGED
        """What `before_commit` returned for the committing transaction (for `after_commit`)."""
        self._alarm_unsynced = 0
        """Committed alarm changes waiting for their sync (at most one: see `_commit_turn`)."""
        self._dirty = False
        """The open transaction may have written (something other than a `SELECT` ran)."""
        self._savepoints = 0
        self._unrecorded_name: str | None = None
        self._committer = committer
        self._inflight: Commit | None = None
        """A whole commit running in the committer (the connection is busy)."""
        self._log: int | None = None
        """A descriptor of the write-ahead log, for the syncs this class makes."""
        self._syncing: Ticket | None = None
        self._syncing_through = 0
        self._sync_requested = False
        self._unsynced: deque[_Unsynced] = deque()
        self._written = 0
        """Commits that wrote to the log, numbered from 1; `_durable` of them are synced."""
        self._durable = 0
        self._sync_error: BaseException | None = None
        """Why a sync failed: every commit from then on fails with it."""

    def park(self) -> sqlite3.Connection | None:
        """Give up the connection if idle (no transaction, commit, sync, call or alarm in
        progress) for the pool to close; the next use opens a new one."""
        connection = self._connection
        if (
            connection is None
            or self.pending_commit
            or self._inflight
            or self._syncing
            or self.busy()
        ):
            return None
        if connection.in_transaction:  # a transaction SQLite itself still holds open
            return None
        self._connection = None
        self._close_log()
        return connection

    def connection(self) -> sqlite3.Connection:
        """The open connection (reopened if the pool closed it), for the runtime's own
        statements that need it whole (see `_private_tables`)."""
        self._dirty = True
        return self._conn()

    def record_name(self, name: str) -> None:
        """Store the object's name with its next commit (kept if one is recorded already).

        Written inside a transaction the object opens anyway, so it costs no commit.
        """
        self._unrecorded_name = name

    def join(self) -> asyncio.Future[None]:
        """The commit future of the current turn's transaction, opening it if needed."""
        if self._inflight is not None:
            self._settle_inflight()
        transaction = self._transaction
        if transaction is None:
            connection = self._conn()
            connection.execute("BEGIN IMMEDIATE")
            self._dirty = self._unrecorded_name is not None
            if self._unrecorded_name is not None:
                connection.execute(
                    "INSERT INTO _durability_name (id, name) VALUES (1, ?)"
                    " ON CONFLICT (id) DO NOTHING",
                    (self._unrecorded_name,),
                )
            transaction = self._loop.create_future()
            self._transaction = self.pending_commit = transaction
            self._loop.call_soon(self._commit_turn, transaction)
        return transaction

    def run(self, statements: tuple[str, ...], bindings: tuple[object, ...]) -> Cursor:
        """Execute statements in the open transaction; the cursor holds the last one's rows."""
        connection = self._conn()
        if not self._dirty and not _reads_only(statements):
            self._dirty = True
        before = connection.total_changes
        try:
            for statement in statements:
                cursor = connection.execute(statement, bindings)
                rows = cursor.fetchall()
            description = cursor.description
        except sqlite3.Error as error:
            self._check_still_open(error)
            raise
        columns = list(map(_column_name, description)) if description else []
        return Cursor(columns, rows, len(rows), connection.total_changes - before)

    def query(self, statement: str, *bindings: object) -> list[tuple[Any, ...]]:
        """Rows of one of the runtime's own statements."""
        if not self._dirty and not _reads_only((statement,)):
            self._dirty = True
        try:
            return self._conn().execute(statement, bindings).fetchall()
        except sqlite3.Error as error:
            self._check_still_open(error)
            raise

    def execute(self, statement: str, *bindings: object) -> int:
        """Run one of the runtime's own writes; the number of rows it changed."""
        self._dirty = True
        try:
            return self._conn().execute(statement, bindings).rowcount
        except sqlite3.Error as error:
            self._check_still_open(error)
            raise

    def savepoint(self) -> Savepoint:
        """Open a nested savepoint inside the turn's transaction."""
        transaction = self.join()
        depth = self._savepoints
        name = _SAVEPOINT_NAMES[depth] if depth < 16 else f"_durability_sp{depth}"
        self._conn().execute("SAVEPOINT " + name)
        self._savepoints = depth + 1
        return Savepoint(name, transaction)

    def release(self, savepoint: Savepoint) -> None:
        """Keep the writes made since `savepoint` (if its transaction still exists)."""
        if self._transaction is savepoint.transaction:
            self._conn().execute("RELEASE " + savepoint.name)
            self._savepoints -= 1

    def rollback_to(self, savepoint: Savepoint) -> None:
        """Undo the writes made since `savepoint` (if its transaction still exists)."""
        if self._transaction is savepoint.transaction:
            connection = self._conn()
            self.alarm_row = UNREAD
            connection.execute(f"ROLLBACK TO {savepoint.name}")
            connection.execute(f"RELEASE {savepoint.name}")
            self._savepoints -= 1

    def commit(self) -> None:
        """Commit the turn's transaction now, on this thread, and make every commit so far
        durable (fsync); a failure fails the futures it concerns. A commit running in the
        committer is waited for first."""
        self._settle_inflight()
        if self.alarm_changed and self._alarm_unsynced:
            self._make_durable()  # alarm changes take effect in order (see `_commit_turn`)
        transaction = self._transaction
        if transaction is not None:
            try:
                flush = self._prepare()
                if flush is not None:
                    flush()
                self._conn().execute("COMMIT")
            except Exception as error:
                self._fail(error)
            else:
                self._ended_transaction(transaction, wrote=True)
        if self._syncing is not None:
            self._settle_sync()
        if self._unsynced:
            self._sync_here()

    def settle(self) -> None:
        """Wait until the alarm row the database holds is the durable one: a whole commit
        running in the committer has ended (or failed and been rolled back), and an
        alarm change committed on the loop has been synced (or failed)."""
        if self._inflight is not None:
            self._settle_inflight()
        if self._alarm_unsynced:
            self._make_durable()

    def _make_durable(self) -> None:
        """Sync now for every commit made so far (waiting for a sync already running)."""
        if self._syncing is not None:
            self._settle_sync()
        if self._written > self._durable and not self._closed:
            self._sync_here()

    def _prepare(self) -> FlushHook | None:
        if self.alarm_changed and self.before_commit is not None:
            flush, self._prepared = self.before_commit(self)
            return flush
        return None

    def _commit_turn(self, transaction: asyncio.Future[None]) -> None:
        if self._transaction is not transaction or self._inflight is not None:
            return
        committer = self._committer
        connection = self._connection
        if committer is None or connection is None:
            self.commit()
            return
        if self.alarm_changed and self._alarm_unsynced:
            # Alarm changes take effect in commit order, each once durable: the earlier
            # one's catalog settle must not land after this one's catalog lower.
            self._make_durable()
            if self._transaction is not transaction:
                return
        try:
            flush = self._prepare()
        except Exception as error:
            self._fail(error)
            return
        if flush is not None or self._log is None:
            if self._syncing is not None:
                # Two syncs of one file at once could split a write-back error between
                # them (the kernel reports it once): this one's comes after.
                self._settle_sync()
                if self._transaction is not transaction:
                    return
            self._commit_elsewhere(committer, connection, flush)
            return
        try:
            connection.execute("COMMIT")
        except Exception as error:
            self._fail(error)
            return
        self._ended_transaction(transaction, self._dirty)
        if self._written > self._durable:
            self._request_sync(committer)

    def _commit_elsewhere(
        self, committer: CommitThreads, connection: sqlite3.Connection, flush: FlushHook | None
    ) -> None:
        """Run the whole commit (what must precede it, `COMMIT`, the log's sync) in
        `committer`; the loop settles it when it ends."""
        try:
            log = self._open_log()
        except OSError as error:
            self._fail(error)
            return
        self._inflight = committer.commit(
            self._loop, _commit_on, (connection, flush, log, committer), self._commit_ended
        )

    def _commit_ended(self, done: Commit) -> None:
        if self._inflight is done:
            self._settle_inflight()

    def _settle_inflight(self) -> None:
        """Wait for the whole commit running in the committer (if any) and settle it: its
        sync made it and every commit before it durable."""
        inflight = self._inflight
        if inflight is None:
            return
        error = inflight.wait()
        self._inflight = None
        transaction = self._transaction
        if transaction is None:
            return
        if isinstance(error, _SyncFailedError):
            self._ended_transaction(transaction, wrote=True)  # in the log, maybe not on disk
            self._synced(self._written, error.__cause__)
        elif error is not None:
            self._fail(error)
            if self._unsynced and self._committer is not None:
                self._request_sync(self._committer)
        else:
            self._ended_transaction(transaction, wrote=True)
            self._synced(self._written, None)

    def _ended_transaction(self, transaction: asyncio.Future[None], wrote: bool) -> None:
        """The transaction's `COMMIT` returned: the next transaction may begin, and this
        one waits for a sync (none without a committer: `FULL` synced it already). One
        that wrote nothing waits only for the commits it may have read."""
        if wrote:
            self._written += 1
        self._unsynced.append((self._written, transaction, self._prepared))
        if self._prepared is not _UNCHANGED:
            self._alarm_unsynced += 1
        self._prepared = _UNCHANGED
        self._transaction = None
        self._savepoints = 0
        self._unrecorded_name = None
        self.alarm_changed = False
        if self._committer is None or self._written == self._durable or self._sync_error:
            self._synced(self._written, None)

    def _request_sync(self, committer: CommitThreads) -> None:
        """Sync the log soon, for every commit made by then (once per loop turn)."""
        if not self._sync_requested:
            self._sync_requested = True
            committer.sync_round(self._loop, self._begin_sync)

    def _begin_sync(self, alone: bool) -> None:
        """Sync for the commits made so far: here if no other object syncs in this round
        and syncs are quick (a thread's round trip would cost the loop more), else in a
        thread, so that the syncs of several objects overlap."""
        self._sync_requested = False
        committer = self._committer
        if (
            committer is None
            or self._syncing is not None
            or self._inflight is not None
            or self._written <= self._durable
            or self._closed
        ):
            return  # a sync still running asks again when it ends; a whole commit syncs
        if not alone:
            try:
                log = self._open_log()
            except (OSError, DatabaseClosedError) as error:
                self._synced(self._written, error)
                return
            self._syncing = committer.in_round(_sync_log, (log, committer), self._sync_ended)
            self._syncing_through = self._written
            return
        self._sync_here()

    def _sync_ended(self, done: Ticket) -> None:
        if self._syncing is not done:
            return
        self._settle_sync()
        if self._written > self._durable and self._committer is not None and not self._closed:
            self._request_sync(self._committer)

    def _settle_sync(self) -> None:
        """Wait for the log's sync running in the committer and end the commits it covers."""
        syncing = self._syncing
        assert syncing is not None
        error = syncing.wait()
        self._syncing = None
        self._synced(self._syncing_through, error)

    def _sync_here(self) -> None:
        """Sync the log on this thread, for every commit made so far."""
        through = self._written
        try:
            _sync_log(self._open_log(), self._committer)
        except (OSError, DatabaseClosedError) as error:
            self._synced(through, error)
        else:
            self._synced(through, None)

    def _synced(self, through: int, error: BaseException | None) -> None:
        """End the commits up to number `through`: durable, or failed with `error` (and
        every later one with it: what reached the disk is unknown from then on)."""
        if error is None and self._sync_error is None:
            self._durable = max(self._durable, through)
            unsynced = self._unsynced
            while unsynced and unsynced[0][0] <= through:
                _, future, prepared = unsynced.popleft()
                if self.pending_commit is future:
                    self.pending_commit = None
                if prepared is not _UNCHANGED:
                    self._alarm_unsynced -= 1
                    if self.after_commit is not None:
                        self.after_commit(self, prepared)
                if not future.done():
                    future.set_result(None)
            return
        first = self._sync_error is None
        error = self._sync_error = self._sync_error or error
        assert error is not None
        self._durable = self._written
        self._alarm_unsynced = 0
        while self._unsynced:
            _, future, _ = self._unsynced.popleft()
            _fail_future(future, error)
        self.pending_commit = self._transaction
        if first:  # the object is rebuilt from its file
            self._fail(error)

    def _fail(self, error: BaseException) -> None:
        self.rollback(error)
        if self.commit_failed is not None:
            self.commit_failed(self, error)

    def rollback(self, error: BaseException) -> None:
        """Drop the turn's uncommitted writes; every call that joined them gets `error`.

        A commit already running in the committer is not undone: it is waited for.
        """
        self._settle_inflight()
        transaction = self._transaction
        self._transaction = None
        self.pending_commit = self._unsynced[-1][1] if self._unsynced else None
        self._savepoints = 0
        self._prepared = _UNCHANGED
        self.alarm_changed = False
        self.alarm_row = UNREAD
        connection = self._connection
        if connection is not None and connection.in_transaction:
            connection.execute("ROLLBACK")
        if transaction is not None:
            _fail_future(transaction, error)

    def close(self) -> None:
        """Commit what is pending, make it durable, and close the connection."""
        self.commit()
        if self._transaction is not None:
            self.rollback(DatabaseClosedError("the database was closed before its commit"))
        self._closed = True
        if self.pool is not None:
            self.pool.forget(self)
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        self._close_log()

    def _open_log(self) -> int:
        """The log's descriptor, opened on first need (the open transaction made SQLite
        open, or create, it). SQLite holds no lock on the log file itself, so closing
        this descriptor drops none of its locks (closing one of `-shm` would)."""
        log = self._log
        if log is None:
            if self._closed or self.file is None or self._connection is None:
                raise DatabaseClosedError("the object's database is closed")
            log = self._log = os.open(f"{self.file}-wal", os.O_RDWR | os.O_CLOEXEC)
        return log

    def _close_log(self) -> None:
        log, self._log = self._log, None
        if log is not None:
            os.close(log)

    def _check_still_open(self, error: sqlite3.Error) -> None:
        # Some errors (e.g. "INSERT OR ROLLBACK") end the whole transaction in SQLite.
        connection = self._connection
        if (
            self._transaction is not None
            and connection is not None
            and not connection.in_transaction
        ):
            self.rollback(error)

    def _conn(self) -> sqlite3.Connection:
        if self._inflight is not None:
            self._settle_inflight()
        connection = self._connection
        pool = self.pool
        if connection is None:
            if self._closed or pool is None or self.file is None:
                raise DatabaseClosedError("the object's database is closed")
            connection = self._connection = pool.reopen(self, self.file)
        elif pool is not None:
            pool.used(self)
        return connection


_Unsynced = tuple[int, asyncio.Future[None], object]
"""A committed transaction waiting for a sync: the number of the last commit that wrote
(its own, if it wrote), its commit future, and what `before_commit` returned for it if it
changed the alarm (`after_commit` gets that once it is durable), else `_UNCHANGED`."""

_UNCHANGED: Final = object()


def _never() -> bool:
    return False


def _fail_future(future: asyncio.Future[None], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)
        # A commit nobody waited for may fail too: its error counts as seen (marked
        # here rather than by a done-callback, which would cost every commit a turn).
        future.exception()


@functools.lru_cache(maxsize=512)
def _reads_only(statements: tuple[str, ...]) -> bool:
    """Whether every statement is a `SELECT` (which cannot write)."""
    return all(first_keyword(statement) == "SELECT" for statement in statements)


class _SyncFailedError(Exception):
    """A whole commit's `COMMIT` returned but the sync after it failed (its cause)."""


_sync_data = getattr(os, "fdatasync", os.fsync)


def _sync_log(log: int, committer: CommitThreads | None) -> None:
    """Make the log's content durable (what `synchronous=FULL` does after a commit), and
    tell `committer` how long that took."""
    started = time.perf_counter()
    _sync_data(log)
    if committer is not None:
        committer.took(time.perf_counter() - started)


def _commit_on(
    connection: sqlite3.Connection,
    flush: FlushHook | None,
    log: int,
    committer: CommitThreads,
) -> None:
    """A whole commit in the committer's thread: what must precede it, `COMMIT`, then the
    log's sync."""
    if flush is not None:
        flush()
    connection.execute("COMMIT")
    try:
        _sync_log(log, committer)
    except OSError as error:
        raise _SyncFailedError(str(error)) from error
