"""A bound on the object files open at once: least recently used idle ones are closed.

An open SQLite connection to a WAL file costs about 150 KiB and four file descriptors
(database, WAL, shared memory, and the runtime's own of the WAL), while a live
object's own state is a few KiB. So the runtime keeps at most `cap` object connections
open; past it, the connections of the least recently used databases that are idle (no
transaction, no commit or sync running, no call or alarm in progress on the object)
are closed, and each is reopened on its
database's next use. Nothing is lost by that: a closed connection had committed
everything, and the reopened one reads exactly the committed file.

Closing the last connection to a WAL file checkpoints it (fsyncs): with a committer
(the real clock) the close runs in its worker threads, off the loop.

The cap is sized from the open-file limit, but descriptors also go to sockets and to
files the cap cannot close (a burst of calls keeps every file it touches busy). So when
opening a file fails for want of descriptors, the pool closes idle connections at once
(those past the cap, and a quarter of the others) and the open is tried once more; it
fails only when nothing was idle to close.
"""

from __future__ import annotations

import concurrent.futures
import logging
import sqlite3
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path
from typing import TypeVar

from ._database import Database
from ._descriptors import out_of_descriptors
from ._opening import connect_file

T = TypeVar("T")

logger = logging.getLogger("durability.runtime")


class OpenDatabases:
    """The open object databases, least recently used first, at most `cap` (when idle)."""

    def __init__(self, cap: int, committer: Executor | None) -> None:
        self.cap = cap
        self._committer = committer
        self._open: OrderedDict[Database, None] = OrderedDict()
        self._closing: list[concurrent.futures.Future[None]] = []

    def __len__(self) -> int:
        return len(self._open)

    def add(self, database: Database) -> None:
        """Count `database` as open and just used; close idle ones past the cap."""
        database.link.pool = self
        self._open[database] = None
        if len(self._open) > self.cap:
            self._trim(database)

    def used(self, database: Database) -> None:
        """`database` was just used: it is the last to be closed."""
        self._open.move_to_end(database)

    def reopen(self, database: Database, file: Path) -> sqlite3.Connection:
        """A new connection for a database whose connection was closed here."""
        connection = self.opening(lambda: connect_file(file, threaded=self._committer is not None))
        self.add(database)
        return connection

    def opening(self, open_file: Callable[[], T]) -> T:
        """`open_file()`, tried again once idle connections were closed if it failed for
        want of file descriptors (its error is raised when none was idle)."""
        try:
            return open_file()
        except (OSError, sqlite3.Error) as error:
            if not out_of_descriptors(error) or not self.relieve():
                raise
            logger.warning("out of file descriptors opening an object file: closed idle ones")
        return open_file()

    def relieve(self) -> int:
        """Free descriptors now: wait for the closes under way, then close idle
        connections on this thread, those past the cap and a quarter of the others (at
        least one). Returns how many connections were closed."""
        pending = len(self._closing)
        self.drain()
        wanted = max(len(self._open) - self.cap, 0) + max(1, len(self._open) // 4)
        closed: list[Database] = []
        for database in self._open:
            if len(closed) >= wanted:
                break
            connection = database.park()
            if connection is not None:
                closed.append(database)
                _close_now(connection)
        for database in closed:
            del self._open[database]
        return pending + len(closed)

    def forget(self, database: Database) -> None:
        """`database` is closed for good (its object was evicted)."""
        self._open.pop(database, None)

    def drain(self) -> None:
        """Wait for the connections being closed in the committer."""
        closing, self._closing = self._closing, []
        concurrent.futures.wait(closing)

    def _trim(self, keep: Database) -> None:
        excess = len(self._open) - self.cap
        parked: list[Database] = []
        for database in self._open:
            if len(parked) >= excess:
                break
            connection = database.park() if database is not keep else None
            if connection is not None:
                parked.append(database)
                self._close(connection)
        for database in parked:
            del self._open[database]

    def _close(self, connection: sqlite3.Connection) -> None:
        if self._committer is None:
            connection.close()
            return
        self._closing = [future for future in self._closing if not future.done()]
        future = self._committer.submit(connection.close)
        future.add_done_callback(_log_failure)
        self._closing.append(future)


def _close_now(connection: sqlite3.Connection) -> None:
    try:
        connection.close()
    except sqlite3.Error as error:
        logger.warning("closing an idle object database failed: %r", error)


def _log_failure(future: concurrent.futures.Future[None]) -> None:
    error = future.exception()
    if error is not None:
        logger.warning("closing an idle object database failed: %r", error)
