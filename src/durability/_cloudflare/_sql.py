"""`sql.exec` over Cloudflare's SQL API, with every row read at once into plain values.

Cloudflare's cursor hands out JavaScript rows (not subscriptable under the built-in
SDK) with `jsnull` for NULL and buffers for BLOBs; reading `raw().toArray()` and
`columnNames` right after `exec` gives the library the dict rows it expects.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .._context import Row
from .._types import SqlValue
from ._ffi import js_list, jsnull, row_of, sql_bindings


class Rows:
    """The rows of one statement, already read; consumed as they are iterated.

    `rows_read` and `rows_written` are Cloudflare's own counters for the statement.
    """

    __slots__ = ("_columns", "_position", "_rows", "_rows_read", "_rows_written")

    def __init__(
        self,
        columns: list[str],
        rows: list[tuple[Any, ...]],
        rows_read: int,
        rows_written: int,
    ) -> None:
        self._columns = columns
        self._rows = rows
        self._position = 0
        self._rows_read = rows_read
        self._rows_written = rows_written

    @property
    def column_names(self) -> list[str]:
        """The result column names, in order."""
        return list(self._columns)

    @property
    def rows_read(self) -> int:
        """Rows the statement read, as Cloudflare counts them."""
        return self._rows_read

    @property
    def rows_written(self) -> int:
        """Rows the statement inserted, updated or deleted."""
        return self._rows_written

    def __iter__(self) -> Iterator[Row]:
        return self

    def __next__(self) -> Row:
        if self._position >= len(self._rows):
            raise StopIteration
        row = self._rows[self._position]
        self._position += 1
        return dict(zip(self._columns, row, strict=True))

    def to_list(self) -> list[Row]:
        """Every remaining row as a dict."""
        return list(self)

    def one(self) -> Row:
        """The only remaining row; `ValueError` unless there is exactly one."""
        remaining = len(self._rows) - self._position
        if remaining != 1:
            got = "no results" if remaining == 0 else "multiple results"
            raise ValueError(f"Expected exactly one result from SQL query, but got {got}.")
        return next(self)

    def raw(self) -> Iterator[tuple[Any, ...]]:
        """The remaining rows as tuples, in column order."""
        while self._position < len(self._rows):
            row = self._rows[self._position]
            self._position += 1
            yield row


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
