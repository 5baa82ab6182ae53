"""One object's SQLite database: its connection and the transaction of the current turn.

Every storage call of a turn joins one `BEGIN IMMEDIATE` transaction; its `COMMIT` is
scheduled with `loop.call_soon`, so it runs once the turn (and every other turn already
queued) has finished, and all their writes share one commit and one fsync. Callers
wait on the commit future before releasing a result: the output gate.

Given a committer (`CommitThreads`: the runtime passes one on the real clock), the
`COMMIT` and its fsync run in a worker thread (sqlite3 releases the GIL), so commits of
different objects overlap while the loop goes on. Until it has finished, the object's
connection is not touched from the loop: the next use of it first waits for the commit
and settles its future, so transactions of one object still follow each other. Without
a committer (a virtual clock) the commit runs on the loop, so runs stay deterministic.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ._commit_threads import Commit, CommitThreads
from ._sql import Cursor

if TYPE_CHECKING:
    from ._pool import OpenDatabases

FlushHook = Callable[[], None]
PrepareHook = Callable[["Database"], "FlushHook | None"]
"""Called before a commit that changes the alarm; may return work (a catalog write) that
must be durable before the `COMMIT`, run in the same place as the commit."""
CommitHook = Callable[["Database"], None]
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
        self.commits = 0
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
        """The commit future of writes not yet committed, if there are any (an attribute,
        not a property: every call's result reads it; only this class sets it)."""
        self._savepoints = 0
        self._unrecorded_name: str | None = None
        self._committer = committer
        self._inflight: Commit | None = None

    def park(self) -> sqlite3.Connection | None:
        """Give up the connection if idle (no transaction, commit, call or alarm in
        progress) for the pool to close; the next use opens a new one."""
        connection = self._connection
        if connection is None or self.pending_commit or self._inflight or self.busy():
            return None
        if connection.in_transaction:  # a transaction SQLite itself still holds open
            return None
        self._connection = None
        return connection

    def connection(self) -> sqlite3.Connection:
        """The open connection (reopened if the pool closed it), for the runtime's own
        statements that need it whole (see `_private_tables`)."""
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
        pending = self.pending_commit
        if pending is None:
            connection = self._conn()
            connection.execute("BEGIN IMMEDIATE")
            if self._unrecorded_name is not None:
                connection.execute(
                    "INSERT INTO _durability_name (id, name) VALUES (1, ?)"
                    " ON CONFLICT (id) DO NOTHING",
                    (self._unrecorded_name,),
                )
            pending = self._loop.create_future()
            self.pending_commit = pending
            self._loop.call_soon(self._commit_turn, pending)
        return pending

    def run(self, statements: tuple[str, ...], bindings: tuple[object, ...]) -> Cursor:
        """Execute statements in the open transaction; the cursor holds the last one's rows."""
        connection = self._conn()
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
        try:
            return self._conn().execute(statement, bindings).fetchall()
        except sqlite3.Error as error:
            self._check_still_open(error)
            raise

    def execute(self, statement: str, *bindings: object) -> int:
        """Run one of the runtime's own writes; the number of rows it changed."""
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
        if self.pending_commit is savepoint.transaction:
            self._conn().execute("RELEASE " + savepoint.name)
            self._savepoints -= 1

    def rollback_to(self, savepoint: Savepoint) -> None:
        """Undo the writes made since `savepoint` (if its transaction still exists)."""
        if self.pending_commit is savepoint.transaction:
            connection = self._conn()
            self.alarm_row = UNREAD
            connection.execute(f"ROLLBACK TO {savepoint.name}")
            connection.execute(f"RELEASE {savepoint.name}")
            self._savepoints -= 1

    def commit(self) -> None:
        """Commit the turn's transaction now, on this thread (fsync); fails its future if
        that fails. A commit already running in the committer is waited for first."""
        self._settle_inflight()
        pending = self.pending_commit
        if pending is None:
            return
        try:
            flush = self._prepare()
            if flush is not None:
                flush()
            self._conn().execute("COMMIT")
        except Exception as error:
            self._fail(error)
            return
        self._committed(pending)

    def settle(self) -> None:
        """Wait for the commit running in the committer, if any: once it has ended (or
        failed and been rolled back), what the database holds is what the file holds."""
        if self._inflight is not None:
            self._settle_inflight()

    def _prepare(self) -> FlushHook | None:
        if self.alarm_changed and self.before_commit is not None:
            return self.before_commit(self)
        return None

    def _commit_elsewhere(self, committer: CommitThreads) -> None:
        """Start the turn's commit in `committer`; the loop settles it when it ends."""
        connection = self._conn()
        try:
            flush = self._prepare()
        except Exception as error:
            self._fail(error)
            return
        self._inflight = committer.commit(
            self._loop, _commit_on, (connection, flush), self._commit_ended
        )

    def _commit_ended(self, done: Commit) -> None:
        if self._inflight is done:
            self._settle_inflight()

    def _settle_inflight(self) -> None:
        """Wait for the commit running in the committer (if any) and settle its future."""
        inflight = self._inflight
        if inflight is None:
            return
        error = inflight.wait()
        self._inflight = None
        if error is not None:
            self._fail(error)
        elif self.pending_commit is not None:
            self._committed(self.pending_commit)

    def _committed(self, pending: asyncio.Future[None]) -> None:
        self.pending_commit = None
        self._savepoints = 0
        self._unrecorded_name = None
        self.commits += 1
        changed, self.alarm_changed = self.alarm_changed, False
        if changed and self.after_commit is not None:
            self.after_commit(self)
        pending.set_result(None)

    def _fail(self, error: BaseException) -> None:
        self.rollback(error)
        if self.commit_failed is not None:
            self.commit_failed(self, error)

    def rollback(self, error: BaseException) -> None:
        """Drop the turn's uncommitted writes; every call that joined them gets `error`.

        A commit already running in the committer is not undone: it is waited for.
        """
        self._settle_inflight()
        pending = self.pending_commit
        self.pending_commit = None
        self._savepoints = 0
        self.alarm_changed = False
        self.alarm_row = UNREAD
        connection = self._connection
        if connection is not None and connection.in_transaction:
            connection.execute("ROLLBACK")
        if pending is not None and not pending.done():
            pending.set_exception(error)
            # A commit nobody waited for may fail too: its error counts as seen (marked
            # here rather than by a done-callback, which would cost every commit a turn).
            pending.exception()

    def close(self) -> None:
        """Commit what is pending and close the connection."""
        self.commit()
        if self.pending_commit is not None:
            self.rollback(DatabaseClosedError("the database was closed before its commit"))
        self._closed = True
        if self.pool is not None:
            self.pool.forget(self)
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _commit_turn(self, pending: asyncio.Future[None]) -> None:
        if self.pending_commit is not pending or self._inflight is not None:
            return
        if self._committer is None or self._connection is None:
            self.commit()
        else:
            self._commit_elsewhere(self._committer)

    def _check_still_open(self, error: sqlite3.Error) -> None:
        # Some errors (e.g. "INSERT OR ROLLBACK") end the whole transaction in SQLite.
        connection = self._connection
        if (
            self.pending_commit is not None
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


def _never() -> bool:
    return False


def _commit_on(connection: sqlite3.Connection, flush: FlushHook | None) -> None:
    """A commit in the committer's thread: what must precede it, then `COMMIT`."""
    if flush is not None:
        flush()
    connection.execute("COMMIT")
