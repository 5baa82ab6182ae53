"""Where a runtime's object databases live (one file each under the path, or memory),
and what they share: the path lock, the alarm catalog and the threads that commit."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from .._clock import WALL_CLOCK, Clock
from ._catalog import Catalog
from ._catalog_file import Key
from ._commit_threads import CommitThreads
from ._database import Database, DatabaseHooks
from ._opening import open_database, open_object_file
from ._path_lock import PathLock
from ._pool import OpenDatabases

COMMIT_THREADS = 8
"""Worker threads for file commits on the real clock: fsyncs of this many objects overlap."""


class ObjectDatabases:
    """One SQLite file per object under `path` (or in-memory databases when `None`).

    On the real clock, file commits run in `COMMIT_THREADS` worker threads; under any
    other clock (a `VirtualClock`) they stay on the loop, so runs are deterministic.
    At most `max_open` object files are open at once (`OpenDatabases`).
    """

    def __init__(self, path: Path | None, clock: Clock, max_open: int) -> None:
        self.path = path
        self.max_open = max_open
        self.open_databases: OpenDatabases | None = None
        self.catalog = Catalog(path / "_catalog.sqlite3" if path is not None else None)
        self._clock = clock
        self._lock = PathLock(path) if path is not None else None
        self._memory: dict[Key, Database] = {}
        self._committer: CommitThreads | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def open(self, loop: asyncio.AbstractEventLoop) -> None:
        """Take the path's lock and open the catalog (both given up again on failure)."""
        if self._lock is not None:
            self._lock.acquire()
        try:
            if self.path is not None and self._clock is WALL_CLOCK:
                self._committer = CommitThreads(COMMIT_THREADS, "durability-commit")
            self.open_databases = OpenDatabases(self.max_open, self._committer)
            self.catalog.open(loop, self._committer)
        except BaseException:
            self._stop_committer()
            if self._lock is not None:
                self._lock.release()
            raise
        self._loop = loop

    def database(self, key: Key, hooks: DatabaseHooks) -> Database:
        """Open the database of object `key`, telling `hooks` what it commits (an
        in-memory one lives as long as the runtime, and takes the hooks given last)."""
        assert self._loop is not None
        if self.path is None:
            database = self._memory.get(key)
            if database is None:
                database = self._memory[key] = open_database(self._loop, None, hooks=hooks)
            database.hooks = hooks
            return database
        pool = self.open_databases
        assert pool is not None
        loop, path = self._loop, self.path
        database = pool.opening(
            lambda: open_object_file(loop, path, key, self._committer, hooks=hooks)
        )
        pool.add(database)
        return database

    def closing_steps(self) -> list[Callable[[], object]]:
        """What closes everything, in order, once every object file is closed."""
        steps: list[Callable[[], object]] = [database.close for database in self._memory.values()]
        self._memory = {}
        if self.open_databases is not None:
            steps.append(self.open_databases.drain)
        steps.append(self.catalog.close)
        steps.append(self._stop_committer)
        if self._lock is not None:
            steps.append(self._lock.release)
        return steps

    def _stop_committer(self) -> None:
        committer, self._committer = self._committer, None
        if committer is not None:
            committer.shutdown(wait=True)
