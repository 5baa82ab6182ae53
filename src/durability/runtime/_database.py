"""One object's SQLite database: the transaction of the current turn, and its commit.

Every storage call of a turn joins one `BEGIN IMMEDIATE` transaction; its `COMMIT` is
scheduled with `loop.call_soon`, so it runs once the turn (and every other turn already
queued) has finished, and all their writes share one commit and one fsync. Callers
wait on the commit future before releasing a result: the output gate. The `COMMIT`
runs on the loop (with a committer it only hands pages to the OS); what makes it
durable, and the commits that run whole in a worker, belong to the `CommitPipeline`;
the connection (which the pool may park while idle) to `ObjectConnection`. The owner
of the database learns of alarm commits and failures through `DatabaseHooks`, given at
construction.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any, Final, Protocol

from ._commit_faults import CommitFaults
from ._commit_pipeline import CommitPipeline
from ._commit_threads import CommitThreads
from ._connection import DatabaseClosedError, ObjectConnection
from ._log_syncs import UNCHANGED, fail_future
from ._sql import Cursor, first_keyword, numbered_parameters

__all__ = ["UNREAD", "Database", "DatabaseClosedError", "DatabaseHooks", "FlushHook", "Savepoint"]

FlushHook = Callable[[], None]
"""Work (a catalog write) that must be durable before an alarm-changing `COMMIT`, run
in the same place as the commit."""

_SAVEPOINT_NAMES = tuple(f"_durability_sp{depth}" for depth in range(16))
"""Savepoints are named by nesting depth, so the same few statements are reused from
SQLite's statement cache (a new name per savepoint would compile each one anew)."""

UNREAD: Final = object()
"""`Database.alarm_row` before the alarm row was read, or after a rollback."""


class DatabaseHooks(Protocol):
    """What a database asks and tells its owner (the runtime), given at construction."""

    def prepare_commit(self, database: Database) -> tuple[FlushHook | None, object]:
        """Before a commit that changes the alarm: what must be durable before its
        `COMMIT` (or `None`), and what `committed` gets once the commit is durable."""
        ...

    def committed(self, database: Database, prepared: object) -> None:
        """An alarm-changing commit is durable (`prepared`: what `prepare_commit` gave)."""
        ...

    def commit_failed(self, database: Database, error: BaseException) -> None:
        """A commit (or its sync) failed: the turn's writes were rolled back."""
        ...

    def busy(self) -> bool:
        """Whether a call or alarm is in progress on the object (its connection stays)."""
        ...


@dataclass(frozen=True, slots=True)
class Savepoint:
    """A savepoint's name and the transaction (commit future) it belongs to."""

    name: str
    transaction: asyncio.Future[None]


_column_name = itemgetter(0)
"""The name of a column in a cursor's `description` (its first item)."""


class Database:
    """The SQLite connection of one object and its per-turn implicit transaction."""

    def __init__(
        self,
        connection: sqlite3.Connection,
        loop: asyncio.AbstractEventLoop,
        file: Path | None,
        hooks: DatabaseHooks,
        committer: CommitThreads | None = None,
        *,
        created: bool = False,
    ) -> None:
        self.hooks = hooks
        self.link = ObjectConnection(connection, file)
        self.pipeline = CommitPipeline(self, loop, committer)
        self.created = created
        """The file was created in this run, by this object's first opening (so it is newer
        than the runtime's start); a later reopening of the same open object keeps it."""
        self.alarm_changed = False
        self.alarm_row: object = UNREAD
        """The alarm row as the open transaction sees it (kept by `_storage`)."""
        self.pending_commit: asyncio.Future[None] | None = None
        """The commit future of the latest writes not yet durable, if there are any: the
        open transaction's, else the last committed one waiting for its sync (an
        attribute, not a property: every call's result reads it)."""
        self.loop = loop
        """The event loop the object runs on (its calls, commits and timers)."""
        self._transaction: asyncio.Future[None] | None = None
        self.dirty = False
        """The open transaction may have written (something other than a `SELECT` ran)."""
        self._savepoints = 0
        self._unrecorded_name: str | None = None
        self.faults: CommitFaults | None = None
        """The runtime's `Faults.commit` for this object, asked before each commit of a
        turn that wrote (`None`: no faults, nothing asked)."""

    @property
    def file(self) -> Path | None:
        """The object's file (`None` in memory)."""
        return self.link.file

    @property
    def open_transaction(self) -> asyncio.Future[None] | None:
        """The commit future of the turn's open transaction, if one is open."""
        return self._transaction

    def park(self) -> sqlite3.Connection | None:
        """Give up the connection if idle (no transaction, commit, sync, call or alarm in
        progress) for the pool to close; the next use opens a new one."""
        if self.pending_commit or self.pipeline.busy or self.hooks.busy():
            return None
        return self.link.park()

    def connection(self) -> sqlite3.Connection:
        """The open connection (reopened if the pool closed it), for the runtime's own
        statements that need it whole (see `_private_tables`)."""
        self.dirty = True
        return self._conn()

    def record_name(self, name: str) -> None:
        """Store the object's name with its next commit (kept if one is recorded already).

        Written inside a transaction the object opens anyway, so it costs no commit.
        """
        self._unrecorded_name = name

    def join(self) -> asyncio.Future[None]:
        """The commit future of the current turn's transaction, opening it if needed."""
        if self.pipeline.inflight is not None:
            self.pipeline.settle_inflight()
        transaction = self._transaction
        if transaction is None:
            connection = self._conn()
            connection.execute("BEGIN IMMEDIATE")
            self.dirty = self._unrecorded_name is not None
            if self._unrecorded_name is not None:
                connection.execute(
                    "INSERT INTO _durability_name (id, name) VALUES (1, ?)"
                    " ON CONFLICT (id) DO NOTHING",
                    (self._unrecorded_name,),
                )
            transaction = self.loop.create_future()
            self._transaction = self.pending_commit = transaction
            self.loop.call_soon(self.pipeline.commit_turn, transaction)
        return transaction

    def run(self, statements: tuple[str, ...], bindings: tuple[object, ...]) -> Cursor:
        """Execute statements in the open transaction; the cursor holds the last one's rows."""
        connection = self._conn()
        if not self.dirty and not reads_only(statements):
            self.dirty = True
        before = connection.total_changes
        try:
            for statement in statements:
                if bindings and numbered_parameters(statement) == len(bindings):
                    cursor = connection.execute(statement, _by_number(bindings))
                else:
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
        if not self.dirty and not reads_only((statement,)):
            self.dirty = True
        try:
            return self._conn().execute(statement, bindings).fetchall()
        except sqlite3.Error as error:
            self._check_still_open(error)
            raise

    def execute(self, statement: str, *bindings: object) -> int:
        """Run one of the runtime's own writes; the number of rows it changed."""
        self.dirty = True
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
        """Commit the turn's transaction now and make every commit so far durable (see
        `CommitPipeline.commit_now`)."""
        self.pipeline.commit_now()

    def settle(self) -> None:
        """Wait until the alarm row the database holds is the durable one (see
        `CommitPipeline.settle`)."""
        self.pipeline.settle()

    def transaction_ended(self, transaction: asyncio.Future[None], wrote: bool) -> None:
        """The transaction's `COMMIT` returned: the next transaction may begin, and this
        one waits in the pipeline for its sync."""
        pipeline = self.pipeline
        prepared = pipeline.prepared
        pipeline.prepared = UNCHANGED
        self._transaction = None
        self._savepoints = 0
        self._unrecorded_name = None
        self.alarm_changed = False
        pipeline.syncs.committed(transaction, wrote, prepared)

    def fail(self, error: BaseException) -> None:
        """A commit failed: roll back, and tell the owner."""
        self.rollback(error)
        self.hooks.commit_failed(self, error)

    def rollback(self, error: BaseException) -> None:
        """Drop the turn's uncommitted writes; every call that joined them gets `error`.

        A commit already running in the committer is not undone: it is waited for.
        """
        self.pipeline.settle_inflight()
        transaction = self._transaction
        self._transaction = None
        self.pending_commit = self.pipeline.syncs.last_unsynced()
        self._savepoints = 0
        self.pipeline.prepared = UNCHANGED
        self.alarm_changed = False
        self.alarm_row = UNREAD
        connection = self.link.connection
        if connection is not None and connection.in_transaction:
            connection.execute("ROLLBACK")
        if transaction is not None:
            fail_future(transaction, error)

    def close(self) -> None:
        """Commit what is pending, make it durable, and close the connection."""
        self.commit()
        if self._transaction is not None:
            self.rollback(DatabaseClosedError("the database was closed before its commit"))
        self.link.close(self)

    def _check_still_open(self, error: sqlite3.Error) -> None:
        # Some errors (e.g. "INSERT OR ROLLBACK") end the whole transaction in SQLite.
        connection = self.link.connection
        if (
            self._transaction is not None
            and connection is not None
            and not connection.in_transaction
        ):
            self.rollback(error)

    def _conn(self) -> sqlite3.Connection:
        if self.pipeline.inflight is not None:
            self.pipeline.settle_inflight()
        link = self.link
        connection = link.connection
        if connection is not None and link.pool is None:
            return connection  # in memory: nothing to count or reopen
        return link.get(self)


@functools.lru_cache(maxsize=512)
def reads_only(statements: tuple[str, ...]) -> bool:
    """Whether every statement is a `SELECT` (which cannot write)."""
    return all(first_keyword(statement) == "SELECT" for statement in statements)


def _by_number(bindings: tuple[object, ...]) -> dict[str, object]:
    """`bindings` as a mapping from the numbers of ``?1`` to ``?N``."""
    return {str(number): value for number, value in enumerate(bindings, 1)}
