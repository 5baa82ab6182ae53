"""The SQLite connection of one object, which the pool may close while it is idle, and
the descriptor of its write-ahead log that the commit pipeline syncs."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._database import Database
    from ._pool import OpenDatabases


class DatabaseClosedError(RuntimeError):
    """The database was closed (its object was evicted or the runtime closed)."""


class ObjectConnection:
    """An object's connection: open, parked (closed by the pool, reopened on next use),
    or closed for good."""

    __slots__ = ("_closed", "_log", "connection", "file", "pool")

    def __init__(self, connection: sqlite3.Connection, file: Path | None) -> None:
        self.file = file
        self.pool: OpenDatabases | None = None
        """Where a file's connection is counted (closed when idle, reopened on use)."""
        self.connection: sqlite3.Connection | None = connection
        """The connection if it is open now (`None` while parked or once closed)."""
        self._closed = False
        self._log: int | None = None

    @property
    def closed(self) -> bool:
        """Whether the connection was closed for good."""
        return self._closed

    @property
    def has_log(self) -> bool:
        """Whether the log's descriptor is open (a connection's first commit opens it)."""
        return self._log is not None

    def get(self, database: Database) -> sqlite3.Connection:
        """The open connection, reopened through the pool if it was parked; the pool
        counts `database` as just used."""
        connection = self.connection
        pool = self.pool
        if connection is None:
            if self._closed or pool is None or self.file is None:
                raise DatabaseClosedError("the object's database is closed")
            connection = self.connection = pool.reopen(database, self.file)
        elif pool is not None:
            pool.used(database)
        return connection

    def park(self) -> sqlite3.Connection | None:
        """Give up the connection unless SQLite holds a transaction open on it; the pool
        closes what this returns."""
        connection = self.connection
        if connection is None or connection.in_transaction:
            return None
        self.connection = None
        self.close_log()
        return connection

    def log(self) -> int:
        """The log's descriptor, opened on first need (the open transaction made SQLite
        open, or create, it). SQLite holds no lock on the log file itself, so closing
        this descriptor drops none of its locks (closing one of `-shm` would)."""
        log = self._log
        if log is None:
            if self._closed or self.file is None or self.connection is None:
                raise DatabaseClosedError("the object's database is closed")
            log = self._log = os.open(f"{self.file}-wal", os.O_RDWR | os.O_CLOEXEC)
        return log

    def close_log(self) -> None:
        log, self._log = self._log, None
        if log is not None:
            os.close(log)

    def close(self, database: Database) -> None:
        """Close the connection and the log for good."""
        self._closed = True
        if self.pool is not None:
            self.pool.forget(database)
        if self.connection is not None:
            self.connection.close()
            self.connection = None
        self.close_log()
