"""The runtime-wide alarm catalog and the lock that gives one Runtime its path.

The catalog maps (namespace, id) to a time no later than the object's armed alarm, so
`start()` arms every object's timer without opening every object. It spans a second
database, and WAL gives no atomic commit across databases, so it is kept a superset:
an entry is written (durably) before an object commit that arms an earlier time, and
removed or raised only after the object's commit; a timer that finds nothing due on
the object is a harmless spurious wake.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from pathlib import Path
from typing import IO

from .._files import sync_directory
from ._errors import PathInUseError

logger = logging.getLogger("durability.runtime")

Key = tuple[str, str]
"""(namespace binding name, 64-hex object id)."""

_held_paths: set[str] = set()


class PathLock:
    """An exclusive lock on a runtime path: `flock` on `<path>/.lock`, checked in-process too."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._real = os.path.realpath(path)
        self._file: IO[bytes] | None = None

    def acquire(self) -> None:
        """Take the lock at once, or raise `PathInUseError`."""
        import fcntl

        message = (
            f"runtime path {str(self._path)!r} is in use by another Runtime "
            "(close it first, or use another path)"
        )
        if self._real in _held_paths:
            raise PathInUseError(message)
        self._path.mkdir(parents=True, exist_ok=True)
        lock_file = open(self._path / ".lock", "ab")  # noqa: SIM115
        try:
            fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock_file.close()
            raise PathInUseError(message) from None
        self._file = lock_file
        _held_paths.add(self._real)

    def release(self) -> None:
        """Give the path up (closing the file drops the flock)."""
        if self._file is not None:
            self._file.close()
            self._file = None
            _held_paths.discard(self._real)


class Catalog:
    """Armed alarms by object: a lower bound of each one's wake time, and its name."""

    def __init__(self, file: Path | None) -> None:
        self._file = file
        self._connection: sqlite3.Connection | None = None
        self._entries: dict[Key, tuple[str | None, int]] = {}
        self._dirty: set[Key] = set()
        self._flush_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def open(self, loop: asyncio.AbstractEventLoop) -> None:
        """Open the catalog file (if any) and load its entries."""
        self._loop = loop
        if self._file is None:
            return
        created = not self._file.exists()
        connection = sqlite3.connect(self._file, isolation_level=None)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        connection.execute(
            "CREATE TABLE IF NOT EXISTS alarms (namespace TEXT NOT NULL, id TEXT NOT NULL,"
            " name TEXT, wake_ms INTEGER NOT NULL, PRIMARY KEY (namespace, id)) WITHOUT ROWID"
        )
        for namespace, object_id, name, wake_ms in connection.execute(
            "SELECT namespace, id, name, wake_ms FROM alarms"
        ):
            self._entries[(namespace, object_id)] = (name, wake_ms)
        if created:
            sync_directory(self._file.parent)
        self._connection = connection

    def entries(self) -> list[tuple[Key, str | None, int]]:
        """Every entry: key, name and the wake lower bound."""
        return [(key, name, wake) for key, (name, wake) in self._entries.items()]

    def lower(self, key: Key, name: str | None, wake_ms: int) -> None:
        """Make sure the entry is no later than `wake_ms`, durably, before that commit."""
        current = self._entries.get(key)
        if current is not None and current[1] <= wake_ms:
            return
        self._entries[key] = (name, wake_ms)
        self._dirty.add(key)
        self.flush()

    def settle(self, key: Key, name: str | None, wake_ms: int | None) -> None:
        """Record the committed wake time (or its absence); written on a later flush."""
        if wake_ms is None:
            if key not in self._entries:
                return
            del self._entries[key]
        else:
            self._entries[key] = (name, wake_ms)
        self._dirty.add(key)
        if not self._flush_scheduled and self._loop is not None:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush_later)

    def flush(self) -> None:
        """Write every changed entry in one transaction."""
        if self._connection is None:
            self._dirty.clear()
            return
        self._flush(self._connection)

    def _flush_later(self) -> None:
        # Settled entries only raise or drop a bound: the catalog stays a superset while
        # they wait, so a failed write is retried by the next flush, not raised here.
        self._flush_scheduled = False
        try:
            self.flush()
        except Exception as error:
            logger.warning("alarm catalog %s: write failed, retried later: %r", self._file, error)

    def _flush(self, connection: sqlite3.Connection) -> None:
        if not self._dirty:
            return
        dirty, self._dirty = self._dirty, set()
        try:
            connection.execute("BEGIN IMMEDIATE")
            for key in dirty:
                entry = self._entries.get(key)
                if entry is None:
                    connection.execute("DELETE FROM alarms WHERE namespace = ? AND id = ?", key)
                else:
                    connection.execute(
                        "INSERT INTO alarms (namespace, id, name, wake_ms) VALUES (?, ?, ?, ?)"
                        " ON CONFLICT (namespace, id) DO UPDATE SET name = excluded.name,"
                        " wake_ms = excluded.wake_ms",
                        (*key, entry[0], entry[1]),
                    )
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            self._dirty |= dirty
            raise

    def close(self) -> None:
        """Flush what is pending and close the file (closed even if the flush fails)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                self._flush(connection)
            finally:
                connection.close()
