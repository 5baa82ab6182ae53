"""`ctx.storage.sql`: synchronous SQL over the object's own database, as Cloudflare's
`SqlStorage` runs it (statements, bindings, limits and errors)."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from .._types import SqlValue
from ._database import UNREAD, Database, reads_only
from ._js_values import js_string
from ._sql import Cursor, check_bindings, names_alarm_table, parse_query, refuse_alarm_trigger
from ._sql_errors import ONLY_LAST_HAS_PARAMETERS, from_sqlite, statement_error

if TYPE_CHECKING:
    from ._storage import ObjectStorage


class ObjectSql:
    """`ctx.storage.sql` (a `SqlStorage`): `exec(query, *bindings)` and `databaseSize`."""

    __slots__ = ("_storage",)

    def __init__(self, storage: ObjectStorage) -> None:
        self._storage = storage

    def exec(self, query: str, *bindings: SqlValue | bool) -> Cursor:
        """Run `query` (one or more statements; only the last may have parameters) now;
        the cursor holds the last one's rows."""
        if not isinstance(query, str):
            # JavaScript reads the query as the text it makes of the value.
            query = js_string(query)
        checked = check_bindings(bindings)
        statements = parse_query(query)
        if not names_alarm_table(query):
            storage = self._storage
            database = storage.enter_to_read() if reads_only(statements) else storage.enter()
            return _run(database, statements, checked)
        refuse_alarm_trigger(statements)
        database = self._storage.enter()
        try:
            return _run(database, statements, checked)
        finally:
            # SQL on the alarm table itself: read the row again, and let the commit
            # update the alarm's timer and catalog entry as `set_alarm` would.
            database.alarm_row = UNREAD
            database.alarm_changed = True

    @property
    def databaseSize(self) -> int:
        """The size of the object's database in bytes (its pages in use)."""
        database = self._storage.enter()
        ((pages,),) = database.query("PRAGMA page_count")
        ((size,),) = database.query("PRAGMA page_size")
        return int(pages) * int(size)


def _run(database: Database, statements: tuple[str, ...], bindings: tuple[object, ...]) -> Cursor:
    """The statements run in order, the bindings going to the last one only."""
    if len(statements) == 1:
        try:
            return database.run(statements, bindings)
        except sqlite3.Error as error:
            raise from_sqlite(error, statements[0]) from None
    written = 0
    for statement in statements[:-1]:
        try:
            written += database.run((statement,), ()).rows_written
        except sqlite3.ProgrammingError as error:
            raise statement_error(ONLY_LAST_HAS_PARAMETERS, type(error)) from None
        except sqlite3.Error as error:
            raise from_sqlite(error, statement) from None
    try:
        last = database.run(statements[-1:], bindings)
    except sqlite3.Error as error:
        raise from_sqlite(error, statements[-1]) from None
    rows = list(last.raw())
    return Cursor(last.column_names, rows, last.rows_read, written + last.rows_written)
