"""The alarm catalog's SQLite file: opening it with its entries, writing changed
entries, the mark of when it last agreed with every object, and setting a corrupt file
aside. What the entries mean, and when they are written, is `_catalog`'s."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from .._files import sync_directory

Key = tuple[str, str]
"""(namespace binding name, 64-hex object id)."""

Row = tuple[Key, tuple[str | None, int] | None]
"""An entry to write: its key and (name, wake bound), or `None` to delete it."""


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS alarms (namespace TEXT NOT NULL, id TEXT NOT NULL,"
    " name TEXT, wake_ms INTEGER NOT NULL, PRIMARY KEY (namespace, id)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER) WITHOUT ROWID",
)


def write_entries(connection: sqlite3.Connection, rows: list[Row]) -> None:
    """Write `rows` in one transaction."""
    connection.execute("BEGIN IMMEDIATE")
    for key, entry in rows:
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


def load_catalog(
    file: Path,
) -> tuple[sqlite3.Connection, dict[Key, tuple[str | None, int]], int | None]:
    """Open `file`; its entries, and when it last agreed with every object (the file is
    closed again on failure)."""
    created = not file.exists()
    connection = sqlite3.connect(file, isolation_level=None, check_same_thread=False)
    entries: dict[Key, tuple[str | None, int]] = {}
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        for statement in _SCHEMA:
            connection.execute(statement)
        for namespace, object_id, name, wake_ms in connection.execute(
            "SELECT namespace, id, name, wake_ms FROM alarms"
        ):
            entries[(namespace, object_id)] = (name, wake_ms)
        rows = connection.execute("SELECT value FROM meta WHERE key = 'agreed_ns'")
        agreed_ns = next((int(value) for (value,) in rows), None)
    except BaseException:
        connection.close()
        raise
    if created:
        sync_directory(file.parent)
    return connection, entries, agreed_ns


def record_agreement(connection: sqlite3.Connection) -> int:
    """Durably note that the catalog agrees with every object as of now (returned)."""
    agreed_ns = time.time_ns()
    connection.execute(
        "INSERT INTO meta (key, value) VALUES ('agreed_ns', ?)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (agreed_ns,),
    )
    return agreed_ns


def set_aside(file: Path) -> None:
    """Move a corrupt catalog (and its WAL files) out of the way, kept for inspection."""
    suffix = f".corrupt-{time.time_ns()}"
    for part in ("", "-wal", "-shm"):
        source = file.with_name(file.name + part)
        if source.exists():
            source.rename(file.with_name(file.name + part + suffix))
    sync_directory(file.parent)
