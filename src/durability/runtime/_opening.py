"""Opening object databases: in memory, or one file each, set up for many small files."""

from __future__ import annotations

import asyncio
import sqlite3
from concurrent.futures import Executor
from pathlib import Path

from .._files import sync_directory
from ._database import Database

CACHE_PAGES = 64
"""SQLite's page cache per object at most, in pages: 256 KiB of 4 KiB pages, not the
default 2 MB, as objects are many and mostly small (the cache grows only as used)."""

CACHED_STATEMENTS = 32
"""Compiled statements kept per connection (sqlite3's default is 128)."""


def _make_directory(directory: Path) -> None:
    """Create `directory` (and parents) so that the new entries survive a power loss."""
    if directory.exists():
        return
    _make_directory(directory.parent)
    directory.mkdir(exist_ok=True)
    sync_directory(directory.parent)


def connect_file(file: Path, *, threaded: bool) -> sqlite3.Connection:
    """A connection to an object file, set up as every object's is (WAL, full sync).

    `threaded`: commits may run in a worker thread. Errors name the file and leave no
    connection open.
    """
    connection = sqlite3.connect(
        file,
        isolation_level=None,
        check_same_thread=not threaded,
        cached_statements=CACHED_STATEMENTS,
    )
    try:
        connection.execute(f"PRAGMA cache_size={CACHE_PAGES}")
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
    except sqlite3.Error as error:
        connection.close()
        raise type(error)(f"{file}: {error}") from error
    return connection


def open_database(
    loop: asyncio.AbstractEventLoop,
    file: Path | None,
    committer: Executor | None = None,
) -> Database:
    """Open (creating if needed) an object's database; `None` keeps it in memory.

    A file that cannot be used raises its `sqlite3` error, with the file named, and
    leaves no connection open. `committer`: where commits run (see `Database`).
    """
    if file is None:
        connection = sqlite3.connect(":memory:", isolation_level=None)
        database = Database(connection, loop, None)
        database.create_private_tables()
        return database
    created = not file.exists()
    if created:
        _make_directory(file.parent)
    connection = connect_file(file, threaded=committer is not None)
    try:
        database = Database(connection, loop, file, committer)
        database.create_private_tables()
    except sqlite3.Error as error:
        connection.close()
        raise type(error)(f"{file}: {error}") from error
    if created:
        sync_directory(file.parent)
    return database


def open_object_file(
    loop: asyncio.AbstractEventLoop,
    root: Path,
    key: tuple[str, str],
    committer: Executor | None = None,
) -> Database:
    """Open the file of object `key` under `root`; its errors name the object too."""
    try:
        return open_database(loop, root / key[0] / f"{key[1]}.sqlite3", committer)
    except sqlite3.Error as error:
        message = f"object {key[0]}:{key[1]} cannot use its database: {error}"
        raise type(error)(message) from error
