"""`sql.exec` over Cloudflare's SQL API, with every row read at once into plain values.

Cloudflare's cursor hands out JavaScript rows (not subscriptable under the built-in
SDK) with `jsnull` for NULL and buffers for BLOBs; reading `raw().toArray()` and
`columnNames` right after `exec` gives the library the dict rows it expects.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._context import Row
from .._sql_rows import ReadRows
from .._types import SqlValue
from ._ffi import js_list, jsnull, row_of, sql_bindings


class Rows(ReadRows[Row]):
    """The rows of one statement as dicts; `rows_read` and `rows_written` are
    Cloudflare's own counters for the statement."""

    __slots__ = ()

    def _row(self, pairs: Iterable[tuple[str, Any]]) -> Row:
        return dict(pairs)


class CloudflareSql:
    """`storage.sql` of a Cloudflare object, answering with `Rows`."""

    __slots__ = ("_raw", "_sql")

    def __init__(self, sql: Any, raw: bool) -> None:
        self._sql = sql
        self._raw = raw

    def exec(self, query: str, *bindings: SqlValue | bool) -> Rows:
        """Run `query` with positional `bindings` (checked first) and read every row."""
        cursor = self._sql.exec(query, *sql_bindings(bindings, self._raw))
        null = jsnull()
        rows = [row_of(values, null) for values in js_list(cursor.raw().toArray())]
        columns = [str(name) for name in js_list(cursor.columnNames)]
        return Rows(columns, rows, int(cursor.rowsRead), int(cursor.rowsWritten))
