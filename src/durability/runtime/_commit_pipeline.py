"""The commit of an object's turn: on the loop, or whole in a committer thread.

The `COMMIT` of a turn's transaction runs once the turn has ended (`commit_turn`,
scheduled by `Database.join`), or at once (`commit_now`: eviction, close). With a
committer, it runs on the loop (it only hands pages to the OS) and the log's sync
follows (`LogSyncs`); a commit that must write the catalog first (an earlier wake
time) or the first one of a connection (SQLite syncs a new log's header and directory)
runs whole in a worker (`commit_elsewhere`), and until it has ended the connection is
not touched from the loop. Without a committer (a virtual clock) every commit runs on
the loop with `FULL`, so runs stay deterministic.
"""

from __future__ import annotations

import asyncio
import sqlite3
from typing import TYPE_CHECKING

from ._commit_threads import Commit, CommitThreads
from ._log_syncs import UNCHANGED, LogSyncs, SyncFailedError, commit_and_sync

if TYPE_CHECKING:
    from ._database import Database, FlushHook


class CommitPipeline:
    """When and where the turns of one database commit, and what follows a commit."""

    __slots__ = ("_database", "_loop", "committer", "inflight", "prepared", "syncs")

    def __init__(
        self,
        database: Database,
        loop: asyncio.AbstractEventLoop,
        committer: CommitThreads | None,
    ) -> None:
        self._database = database
        self._loop = loop
        self.committer = committer
        self.syncs = LogSyncs(database, loop, committer)
        self.inflight: Commit | None = None
        """A whole commit running in the committer (the connection is busy)."""
        self.prepared: object = UNCHANGED
        """What `prepare_commit` returned for the committing transaction."""

    @property
    def busy(self) -> bool:
        """Whether a whole commit or a sync is running in the committer."""
        return self.inflight is not None or self.syncs.syncing

    def commit_now(self) -> None:
        """Commit the turn's transaction now, on this thread, and make every commit so far
        durable (fsync); a failure fails the futures it concerns. A commit running in the
        committer is waited for first."""
        database, syncs = self._database, self.syncs
        self.settle_inflight()
        if database.alarm_changed and syncs.alarm_unsynced:
            syncs.make_durable()  # alarm changes take effect in order (see `commit_turn`)
        transaction = database.open_transaction
        if transaction is not None:
            try:
                flush = self._prepare()
                if flush is not None:
                    flush()
                database.link.get(database).execute("COMMIT")
            except Exception as error:
                database.fail(error)
            else:
                database.transaction_ended(transaction, wrote=True)
        syncs.finish()

    def settle(self) -> None:
        """Wait until the alarm row the database holds is a committed one: a whole commit
        running in the committer has ended (or failed and been rolled back). An alarm
        change committed on the loop is trusted before its sync: a failed sync fails
        every later commit and rebuilds the object from its file, and a crash that loses
        it loses every later commit with it (the log is replayed in order)."""
        if self.inflight is not None:
            self.settle_inflight()

    def _prepare(self) -> FlushHook | None:
        database = self._database
        if database.alarm_changed:
            flush, self.prepared = database.hooks.prepare_commit(database)
            return flush
        return None

    def commit_turn(self, transaction: asyncio.Future[None]) -> None:
        """Commit `transaction` at the end of its turn (if it is still the open one)."""
        database, syncs = self._database, self.syncs
        if database.open_transaction is not transaction or self.inflight is not None:
            return
        faults = database.faults
        if faults is not None and database.dirty and faults.intercept(database, transaction):
            return
        connection = database.link.connection
        if self.committer is None or connection is None:
            self.commit_now()
            return
        if database.alarm_changed and syncs.alarm_unsynced and syncs.syncing:
            # Alarm changes take effect in commit order, each once durable: the settle of
            # an earlier one that a running sync covers must not land after this one's
            # catalog lower. (One not yet synced is settled with this one, by the sync
            # that covers both: see `LogSyncs.synced`.)
            syncs.settle_sync()
            if database.open_transaction is not transaction:
                return
        try:
            flush = self._prepare()
        except Exception as error:
            database.fail(error)
            return
        if flush is not None or not database.link.has_log:
            if syncs.syncing:
                # Two syncs of one file at once could split a write-back error between
                # them (the kernel reports it once): this one's comes after.
                syncs.settle_sync()
                if database.open_transaction is not transaction:
                    return
            self.commit_elsewhere(connection, flush)
            return
        try:
            connection.execute("COMMIT")
        except Exception as error:
            database.fail(error)
            return
        database.transaction_ended(transaction, database.dirty)
        syncs.sync_soon()

    def commit_elsewhere(self, connection: sqlite3.Connection, flush: FlushHook | None) -> None:
        """Run the whole commit (what must precede it, `COMMIT`, the log's sync) in the
        committer; the loop settles it when it ends."""
        committer = self.committer
        assert committer is not None
        try:
            log = self._database.link.log()
        except OSError as error:
            self._database.fail(error)
            return
        self.inflight = committer.commit(
            self._loop, commit_and_sync, (connection, flush, log, committer), self._commit_ended
        )

    def _commit_ended(self, done: Commit) -> None:
        if self.inflight is done:
            self.settle_inflight()

    def settle_inflight(self) -> None:
        """Wait for the whole commit running in the committer (if any) and settle it: its
        sync made it and every commit before it durable."""
        inflight = self.inflight
        if inflight is None:
            return
        error = inflight.wait()
        self.inflight = None
        database, syncs = self._database, self.syncs
        transaction = database.open_transaction
        if transaction is None:
            return
        if isinstance(error, SyncFailedError):
            database.transaction_ended(transaction, wrote=True)  # in the log, maybe not on disk
            syncs.synced(syncs.written, error.__cause__)
        elif error is not None:
            database.fail(error)
            syncs.sync_soon()
        else:
            database.transaction_ended(transaction, wrote=True)
            syncs.synced(syncs.written, None)
