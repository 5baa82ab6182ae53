"""The syncs that make an object's commits durable, in order, once their `COMMIT` ran.

Given a committer (`CommitThreads`: the runtime passes one on the real clock), SQLite
writes the log without syncing it (`synchronous=NORMAL`) and these syncs are the ones
SQLite's `FULL` would make after each commit: commit futures end in order when a sync
that began after their `COMMIT` has ended (one sync covers every commit made before it
began). A sync runs on the loop when this object syncs alone in the loop turn and syncs
are quick, else in the committer's threads beside other objects'
(`CommitThreads.sync_round`). Without a committer (a virtual clock) SQLite syncs every
commit itself (`FULL`) and each commit future ends at once. A failed sync fails every
commit not yet durable, and every later one: what reached the disk is unknown.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from ._commit_threads import CommitThreads, Ticket
from ._connection import DatabaseClosedError

if TYPE_CHECKING:
    from ._database import Database

UNCHANGED: Final = object()
"""What a commit that did not change the alarm passes as `prepared`."""

_Unsynced = tuple[int, asyncio.Future[None], object]
"""A committed transaction waiting for a sync: the number of the last commit that wrote
(its own, if it wrote), its commit future, and what `prepare_commit` returned for it if
it changed the alarm (`committed` gets that once it is durable), else `UNCHANGED`."""


class LogSyncs:
    """The syncs of one database's log (see the module docstring)."""

    __slots__ = (
        "_database",
        "_durable",
        "_hurried",
        "_loop",
        "_sync_error",
        "_sync_requested",
        "_syncing",
        "_syncing_through",
        "_unsynced",
        "_written",
        "alarm_unsynced",
        "committer",
    )

    def __init__(
        self,
        database: Database,
        loop: asyncio.AbstractEventLoop,
        committer: CommitThreads | None,
    ) -> None:
        self._database = database
        self._loop = loop
        self.committer = committer
        self.alarm_unsynced = 0
        """Committed alarm changes waiting for their sync (at most one: see
        `CommitPipeline.commit_turn`)."""
        self._syncing: Ticket | None = None
        self._syncing_through = 0
        self._sync_requested = False
        self._unsynced: deque[_Unsynced] = deque()
        self._written = 0
        """Commits that wrote to the log, numbered from 1; `_durable` of them are synced."""
        self._durable = 0
        self._hurried = False
        """Something waits for the commits so far (or the open one): no window."""
        self._sync_error: BaseException | None = None
        """Why a sync failed: every commit from then on fails with it."""

    @property
    def syncing(self) -> bool:
        """Whether a sync of the log is running in the committer."""
        return self._syncing is not None

    @property
    def written(self) -> int:
        """How many commits wrote to the log so far."""
        return self._written

    def last_unsynced(self) -> asyncio.Future[None] | None:
        """The commit future of the last committed transaction not yet durable, if any."""
        return self._unsynced[-1][1] if self._unsynced else None

    def committed(self, transaction: asyncio.Future[None], wrote: bool, prepared: object) -> None:
        """`transaction`'s `COMMIT` returned: it waits for a sync (none without a
        committer: `FULL` synced it already). One that wrote nothing waits only for the
        commits it may have read."""
        if wrote:
            self._written += 1
        self._unsynced.append((self._written, transaction, prepared))
        if prepared is not UNCHANGED:
            self.alarm_unsynced += 1
        if self.committer is None or self._written == self._durable or self._sync_error:
            self.synced(self._written, None)

    def sync_soon(self) -> None:
        """Sync the log soon, if commits wait for it (once per loop turn)."""
        committer = self.committer
        if committer is None or self._written <= self._durable:
            return
        if not self._sync_requested:
            self._sync_requested = True
            committer.sync_round(self._loop, self._begin_sync)
        if self._hurried:
            committer.hurry()

    def hurry(self) -> None:
        """Something waits until the commits made so far, or the open transaction's, are
        durable: their sync waits for no later commits (`CommitThreads.hurry`), once the
        open transaction (if any) has committed."""
        self._hurried = True
        if (
            self._sync_requested
            and self.committer is not None
            and self._database.open_transaction is None
        ):
            self.committer.hurry()

    def finish(self) -> None:
        """Make every commit so far durable now, on this thread (waiting for a sync that
        is running in the committer)."""
        if self._syncing is not None:
            self.settle_sync()
        if self._unsynced:
            self._sync_here()

    def make_durable(self) -> None:
        """Sync now for every commit made so far (waiting for a sync already running)."""
        if self._syncing is not None:
            self.settle_sync()
        if self._written > self._durable and not self._database.link.closed:
            self._sync_here()

    def _begin_sync(self, alone: bool) -> None:
        """Sync for the commits made so far: here if no other object syncs in this round
        and syncs are quick (a thread's round trip would cost the loop more), else in a
        thread, so that the syncs of several objects overlap."""
        self._sync_requested = False
        if self._database.open_transaction is None:
            self._hurried = False
        committer = self.committer
        if (
            committer is None
            or self._syncing is not None
            or self._database.pipeline.inflight is not None
            or self._written <= self._durable
            or self._database.link.closed
        ):
            return  # a sync still running asks again when it ends; a whole commit syncs
        if not alone:
            try:
                log = self._database.link.log()
            except (OSError, DatabaseClosedError) as error:
                self.synced(self._written, error)
                return
            self._syncing = committer.in_round(_sync_log, (log, committer), self._sync_ended)
            self._syncing_through = self._written
            return
        self._sync_here()

    def _sync_ended(self, done: Ticket) -> None:
        if self._syncing is not done:
            return
        self.settle_sync()
        if not self._database.link.closed:
            self.sync_soon()

    def settle_sync(self) -> None:
        """Wait for the log's sync running in the committer and end the commits it covers."""
        syncing = self._syncing
        assert syncing is not None
        error = syncing.wait()
        self._syncing = None
        self.synced(self._syncing_through, error)

    def _sync_here(self) -> None:
        """Sync the log on this thread, for every commit made so far."""
        through = self._written
        try:
            _sync_log(self._database.link.log(), self.committer)
        except (OSError, DatabaseClosedError) as error:
            self.synced(through, error)
        else:
            self.synced(through, None)

    def synced(self, through: int, error: BaseException | None) -> None:
        """End the commits up to number `through`: durable, or failed with `error` (and
        every later one with it: what reached the disk is unknown from then on)."""
        database = self._database
        if error is None and self._sync_error is None:
            self._durable = max(self._durable, through)
            unsynced = self._unsynced
            last_alarm: object = UNCHANGED
            while unsynced and unsynced[0][0] <= through:
                _, future, prepared = unsynced.popleft()
                if database.pending_commit is future:
                    database.pending_commit = None
                if prepared is not UNCHANGED:
                    self.alarm_unsynced -= 1
                    last_alarm = prepared
                if not future.done():
                    future.set_result(None)
            if last_alarm is not UNCHANGED:
                # Of alarm changes made durable together, the last is the alarm now: only
                # it settles, so the catalog never holds an earlier one meanwhile.
                database.hooks.committed(database, last_alarm)
            return
        first = self._sync_error is None
        error = self._sync_error = self._sync_error or error
        assert error is not None
        self._durable = self._written
        self.alarm_unsynced = 0
        while self._unsynced:
            _, future, _ = self._unsynced.popleft()
            fail_future(future, error)
        database.pending_commit = database.open_transaction
        if first:  # the object is rebuilt from its file
            database.fail(error)


def fail_future(future: asyncio.Future[None], error: BaseException) -> None:
    """Fail a commit future (if not done), its error counted as seen."""
    if not future.done():
        future.set_exception(error)
        # A commit nobody waited for may fail too: its error counts as seen (marked
        # here rather than by a done-callback, which would cost every commit a turn).
        future.exception()


_sync_data = getattr(os, "fdatasync", os.fsync)


def _sync_log(log: int, committer: CommitThreads | None) -> None:
    """Make the log's content durable (what `synchronous=FULL` does after a commit), and
    tell `committer` how long that took."""
    started = time.perf_counter()
    _sync_data(log)
    if committer is not None:
        committer.took(time.perf_counter() - started)


class SyncFailedError(Exception):
    """A whole commit's `COMMIT` returned but the sync after it failed (its cause)."""


def commit_and_sync(
    connection: sqlite3.Connection,
    flush: Callable[[], None] | None,
    log: int,
    committer: CommitThreads,
) -> None:
    """A whole commit in a committer thread: what must precede it (`flush`), `COMMIT`,
    then the log's sync (`SyncFailedError` if only that failed)."""
    if flush is not None:
        flush()
    connection.execute("COMMIT")
    try:
        _sync_log(log, committer)
    except OSError as error:
        raise SyncFailedError(str(error)) from error
