"""Opening object databases: in memory, or one file each, set up for many small files.

A new object's file is written whole before SQLite opens it: an empty database that
already holds the runtime's tables and is in WAL mode (bytes a SQLite connection
produced, see `_new_file_image`). It is written under a staging name, synced, and
renamed into place, so a crash leaves either no file or a complete one, never a
partial one. This spares the three commits SQLite would otherwise make on a new file
(the switch to WAL through a rollback journal, then the runtime's tables) and their
syncs. The renamed entry is made durable by the directory sync SQLite itself makes
when the object's first commit creates its write-ahead log, before that commit
returns (docs/runtime.md, "Creating an object"); a file nothing was committed to yet
holds nothing, so losing it loses nothing.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sqlite3
from pathlib import Path

from .._files import sync_directory
from ._commit_threads import CommitThreads
from ._database import Database, DatabaseHooks
from ._object_hooks import UNWATCHED
from ._private_tables import PRIVATE_TABLES, create_private_tables
from ._sql import apply_sql_limits

CACHE_PAGES = 64
"""SQLite's page cache per object at most, in pages: 256 KiB of 4 KiB pages, not the
default 2 MB, as objects are many and mostly small (the cache grows only as used)."""

CACHED_STATEMENTS = 32
"""Compiled statements kept per connection (sqlite3's default is 128)."""

STAGING_SUFFIX = "-new"
"""A new object file is written as `<id>.sqlite3-new`, then renamed to `<id>.sqlite3`."""

_WAL_FORMAT = 2
"""The file format version bytes (header offsets 18 and 19) of a database in WAL mode."""

_sync_data = getattr(os, "fdatasync", os.fsync)


@functools.cache
def _new_file_image() -> bytes:
    """An empty object database as bytes: the runtime's tables, in WAL mode.

    Serialized from an in-memory SQLite database holding the tables; its header's
    read and write format versions are set to 2, which is what `PRAGMA
    journal_mode=WAL` writes on a file.
    """
    connection = sqlite3.connect(":memory:")
    try:
        for statement in PRIVATE_TABLES:
            connection.execute(statement)
        image = bytearray(connection.serialize())
    finally:
        connection.close()
    image[18] = image[19] = _WAL_FORMAT
    return bytes(image)


@functools.cache
def _sqlite_syncs_directories() -> bool:
    """Whether this SQLite syncs the directory when it creates a write-ahead log."""
    connection = sqlite3.connect(":memory:")
    try:
        options = {row[0] for row in connection.execute("PRAGMA compile_options")}
    finally:
        connection.close()
    return "DISABLE_DIRSYNC" not in options


def _make_directory(directory: Path) -> None:
    """Create `directory` (and parents) so that the new entries survive a power loss."""
    if directory.exists():
        return
    _make_directory(directory.parent)
    directory.mkdir(exist_ok=True)
    sync_directory(directory.parent)


def _create_file(file: Path) -> None:
    """Put a complete, synced new object database at `file` (absent until renamed)."""
    for leftover in ("-wal", "-shm"):
        # A log without its database belongs to no file (SQLite drops it for an empty one).
        file.with_name(file.name + leftover).unlink(missing_ok=True)
    staging = file.with_name(file.name + STAGING_SUFFIX)
    image = memoryview(_new_file_image())
    descriptor = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while image:
            image = image[os.write(descriptor, image) :]
        _sync_data(descriptor)
    finally:
        os.close(descriptor)
    os.rename(staging, file)
    if not _sqlite_syncs_directories():
        sync_directory(file.parent)


def connect_file(file: Path, *, threaded: bool) -> sqlite3.Connection:
    """A connection to an object file, set up as every object's is (WAL, full sync,
    temporary data in memory).

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
        # Statement and savepoint journals and the scratch tables of a multi-row write
        # would otherwise be temporary files, written a page at a time (none survives
        # its transaction, so none is needed to recover a crash).
        connection.execute("PRAGMA temp_store=MEMORY")
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute(f"PRAGMA synchronous={'NORMAL' if threaded else 'FULL'}")
        apply_sql_limits(connection)
    except sqlite3.Error as error:
        connection.close()
        raise type(error)(f"{file}: {error}") from error
    return connection


def open_database(
    loop: asyncio.AbstractEventLoop,
    file: Path | None,
    committer: CommitThreads | None = None,
    *,
    hooks: DatabaseHooks = UNWATCHED,
) -> Database:
    """Open (creating if needed) an object's database; `None` keeps it in memory.

    A file that cannot be used raises its `sqlite3` error, with the file named, and
    leaves no connection open. `committer`: where commits run (see `CommitPipeline`);
    `hooks`: what the database tells its owner.
    """
    if file is None:
        connection = sqlite3.connect(":memory:", isolation_level=None)
        apply_sql_limits(connection)
        database = Database(connection, loop, None, hooks)
        create_private_tables(database)
        return database
    created = not file.exists()
    if created:
        _make_directory(file.parent)
        _create_file(file)
    connection = connect_file(file, threaded=committer is not None)
    try:
        database = Database(connection, loop, file, hooks, committer, created=created)
        if not created:
            create_private_tables(database)
    except sqlite3.Error as error:
        connection.close()
        raise type(error)(f"{file}: {error}") from error
    return database


def open_object_file(
    loop: asyncio.AbstractEventLoop,
    root: Path,
    key: tuple[str, str],
    committer: CommitThreads | None = None,
    *,
    hooks: DatabaseHooks = UNWATCHED,
) -> Database:
    """Open the file of object `key` under `root`; its errors name the object too."""
    try:
        return open_database(loop, root / key[0] / f"{key[1]}.sqlite3", committer, hooks=hooks)
    except sqlite3.Error as error:
        message = f"object {key[0]}:{key[1]} cannot use its database: {error}"
        raise type(error)(message) from error
