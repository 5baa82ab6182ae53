"""The runtime's own tables in each object file: KV pairs, the alarm, the object's name."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._database import Database

PRIVATE_TABLES = (
    "CREATE TABLE IF NOT EXISTS _durability_kv (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
    " WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS _durability_alarm ("
    " id INTEGER PRIMARY KEY CHECK (id = 1),"
    " scheduled_ms INTEGER,"
    " retry_ms INTEGER,"
    " retry_attempt INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS _durability_name ("
    " id INTEGER PRIMARY KEY CHECK (id = 1), name TEXT NOT NULL)",
)


def create_private_tables(database: Database) -> None:
    """The runtime's own tables, in the database's open transaction if any.

    Otherwise in one transaction of their own: a new file costs one commit, not one
    per table.
    """
    connection = database.connection()
    if connection.in_transaction:
        for statement in PRIVATE_TABLES:
            connection.execute(statement)
        return
    connection.execute("BEGIN")
    try:
        for statement in PRIVATE_TABLES:
            connection.execute(statement)
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


def recorded_name(database: Database) -> str | None:
    """The object's name as recorded in its file, if one was (`Database.record_name`)."""
    row = database.connection().execute("SELECT name FROM _durability_name WHERE id = 1").fetchone()
    return None if row is None else str(row[0])
