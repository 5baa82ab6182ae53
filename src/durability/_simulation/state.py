"""What the objects of a simulated runtime have stored, for invariants to read."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from typing import Any

from .._object_files import find_objects, open_read_only
from ..runtime import Runtime


class StoredObject:
    """One object's committed state: its namespace, id and name, and its tables to query.

    Read it between the steps of a scenario or in an invariant (not from inside a call):
    it reads what the object's database holds then. The queries only read.
    """

    def __init__(
        self, namespace: str, id: str, connection: sqlite3.Connection, name: str | None = None
    ) -> None:
        self.namespace = namespace
        self.id = id
        self._connection = connection
        self._name = name

    @functools.cached_property
    def tables(self) -> frozenset[str]:
        """The names of the object's tables."""
        query = "SELECT name FROM sqlite_master WHERE type = 'table'"
        return frozenset(row[0] for row in self._connection.execute(query))

    @functools.cached_property
    def name(self) -> str | None:
        """The object's name (as recorded when first used), or `None`."""
        return self._name if self._name is not None else self._recorded_name()

    def __repr__(self) -> str:
        return f"StoredObject({self.label})"

    @property
    def label(self) -> str:
        """`NAMESPACE:name` (or the id's first 12 hex digits when it has no name)."""
        return f"{self.namespace}:{self.name if self.name is not None else self.id[:12]}"

    def has(self, *tables: str) -> bool:
        """Whether every one of `tables` exists in the object's database."""
        return all(table in self.tables for table in tables)

    def rows(self, query: str, *bindings: object) -> list[dict[str, Any]]:
        """The rows of a read-only `query`, as dicts by column name."""
        cursor = self._connection.execute(query, bindings)
        columns = [column[0] for column in cursor.description or ()]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]

    @property
    def alarm_at(self) -> int | None:
        """When the runtime wakes the object next: its alarm, or a pending retry of it."""
        if not self.has("_durability_alarm"):
            return None
        rows = self.rows("SELECT scheduled_ms, retry_ms FROM _durability_alarm WHERE id = 1")
        times = [t for t in (rows[0].values() if rows else ()) if t is not None]
        return min(times) if times else None

    def _recorded_name(self) -> str | None:
        if not self.has("_durability_name"):
            return None
        rows = self.rows("SELECT name FROM _durability_name WHERE id = 1")
        return str(rows[0]["name"]) if rows else None


def stored_objects(runtime: Runtime, opened: list[Callable[[], None]]) -> list[StoredObject]:
    """Every object `runtime` stores, sorted by namespace and id. Connections opened for
    it (a file-backed runtime's, read-only) add their `close` to `opened`."""
    databases = runtime._databases
    if databases.path is None:
        found = [
            StoredObject(namespace, hex_id, database.link.get(database))
            for (namespace, hex_id), database in databases._memory.items()
        ]
    else:
        found = []
        for file in find_objects(databases.path):
            connection = open_read_only(file.file)
            opened.append(connection.close)
            found.append(StoredObject(file.namespace, file.id, connection))
    return sorted(found, key=lambda stored: (stored.namespace, stored.id))
