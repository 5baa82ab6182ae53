"""`Tables`: an object's database as the inspection readers see it (read-only)."""

from __future__ import annotations

import sqlite3
from typing import Any

DETAIL_ROWS = 100
"""At most this many rows of one kind (operations, alarms, ...) per object."""


class Tables:
    """An object's open connection and the names of the tables it has."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection
        self.names = frozenset(
            name
            for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        )

    def has(self, *names: str) -> bool:
        """Whether every one of `names` exists."""
        return all(name in self.names for name in names)

    def rows(self, query: str, *bindings: object) -> list[dict[str, Any]]:
        """The rows of `query` as dicts."""
        cursor = self.connection.execute(query, bindings)
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
