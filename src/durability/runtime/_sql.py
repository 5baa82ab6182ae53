"""SQL text and values as the Workers SQL API accepts them, and its cursor.

`sql.exec` takes one or more statements (only the last may have parameters);
transaction control statements are refused (the host owns the transaction); bindings
are checked as the Workers runtime checks them (integers must fit in +/-(2**53 - 1),
booleans become 0/1), and each connection gets the Workers SQL limits (100 bound
parameters and 100 columns, 100,000-byte statements, 50-byte LIKE patterns), so SQLite
itself refuses what Cloudflare's refuses, with the same messages.
"""

from __future__ import annotations

import functools
import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from .._sql_rows import ReadRows
from .._types import MAX_SAFE_INTEGER
from ._js_errors import js_error
from ._js_values import JsDict
from ._sql_errors import BIG_INT, NO_STATEMENT, TRANSACTION_STATEMENTS, statement_error

Row = JsDict
"""One result row: a dict whose columns also read as attributes (`row.name`), the
`JsDict` Cloudflare's `workers-runtime-sdk` gives (the built-in SDK's rows read as
attributes too), so code written for Cloudflare reads rows the same way here."""


MAX_BINDINGS = 100
"""Bound parameters per query, as Cloudflare's SQLite-backed Durable Objects allow."""

MAX_STATEMENT_BYTES = 100_000
"""The longest SQL statement Cloudflare's SQLite-backed Durable Objects accept."""

SQL_LIMITS = (
    (sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, MAX_BINDINGS),
    (sqlite3.SQLITE_LIMIT_COLUMN, 100),
    (sqlite3.SQLITE_LIMIT_SQL_LENGTH, MAX_STATEMENT_BYTES),
    (sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 50),
)
"""The SQLite limits a Cloudflare SQLite-backed Durable Object runs with."""


def apply_sql_limits(connection: sqlite3.Connection) -> None:
    """Give an object's connection Cloudflare's SQL limits."""
    for limit, value in SQL_LIMITS:
        connection.setlimit(limit, value)


_PARAMETER = re.compile(r"\?(\d*)")


@functools.lru_cache(maxsize=512)
def numbered_parameters(statement: str) -> int:
    """N when `statement`'s parameters are exactly ``?1`` to ``?N`` (each used, none bare),
    else 0. Cloudflare binds a list to them by number; some versions of Python's sqlite3
    (3.12's) warn that binding a list to them is deprecated, so the runtime binds such a
    list as a mapping from each number."""
    found = _PARAMETER.findall(statement)
    if not found or "" in found:
        return 0
    numbers = set(map(int, found))
    highest = max(numbers)
    return highest if numbers == set(range(1, highest + 1)) else 0


_FIRST_KEYWORD = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$))*([A-Za-z]+)", re.DOTALL)
_TRANSACTION_KEYWORDS = frozenset({"BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE"})


def first_keyword(statement: str) -> str | None:
    """The first SQL keyword of `statement` (upper case), skipping comments."""
    match = _FIRST_KEYWORD.match(statement)
    return match.group(1).upper() if match else None


_CONTENT = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$))*+[^\s;]", re.DOTALL)
"""Matches text with something besides blanks, comments and semicolons (a statement,
if only a wrong one, as `5` is)."""


def _has_content(text: str) -> bool:
    return _CONTENT.match(text) is not None


def split_statements(query: str) -> list[str]:
    """The statements of `query`, split where SQLite sees a complete statement."""
    if ";" not in query:
        return [query] if _has_content(query) else []
    statements: list[str] = []
    start = 0
    position = query.find(";")
    while position != -1:
        candidate = query[start : position + 1]
        if sqlite3.complete_statement(candidate):
            if _has_content(candidate):
                statements.append(candidate)
            start = position + 1
        position = query.find(";", position + 1)
    rest = query[start:]
    if _has_content(rest):
        statements.append(rest)
    return statements


@functools.lru_cache(maxsize=512)
def parse_query(query: str) -> tuple[str, ...]:
    """The checked statements of `query` (cached: most queries are constant strings)."""
    statements = split_statements(query)
    if not statements:
        raise statement_error(NO_STATEMENT, ValueError)
    for statement in statements:
        check_statement(statement)
    return tuple(statements)


@functools.lru_cache(maxsize=512)
def names_alarm_table(query: str) -> bool:
    """Whether `query` mentions the runtime's alarm table (whose row it keeps in memory)."""
    return "_durability_alarm" in query.lower()


_CREATE_TRIGGER = re.compile(r"\s*CREATE\s+(?:TEMP\s+|TEMPORARY\s+)?TRIGGER\b", re.IGNORECASE)


def refuse_alarm_trigger(statements: Sequence[str]) -> None:
    """`ValueError` for a trigger that names the alarm table: its writes would bypass the
    runtime, which keeps the alarm row in memory and arms the timer from it."""
    for statement in statements:
        if _CREATE_TRIGGER.match(statement) and names_alarm_table(statement):
            raise ValueError(
                "a trigger may not name _durability_alarm: set the alarm with "
                "ctx.storage.set_alarm() (the runtime arms its timer from its own writes)"
            )


def check_statement(statement: str) -> None:
    """Refuse transaction control: the host commits each turn (use `transactionSync`
    or `transaction` for an atomic group of writes)."""
    if first_keyword(statement) in _TRANSACTION_KEYWORDS:
        raise statement_error(TRANSACTION_STATEMENTS, ValueError)


_MIN_SAFE_INTEGER = -MAX_SAFE_INTEGER


def check_bindings(bindings: Sequence[object]) -> tuple[object, ...]:
    """Bindings as SQLite gets them; `TypeError` for values the Workers API refuses."""
    values: Sequence[Any] = bindings  # Any: no `cast` call per integer
    for value in values:
        # The common case, checked without building a new tuple: text, floats, NULLs and
        # integers within the exact range pass as they are.
        kind = type(value)
        if kind is str or value is None or kind is float:
            continue
        if kind is not int or not _MIN_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            break
    else:
        return bindings if type(bindings) is tuple else tuple(bindings)
    checked: list[object] = []
    for index, value in enumerate(bindings):
        kind = type(value)
        if kind is str or kind is float or value is None:
            checked.append(value)
        elif isinstance(value, bool):
            checked.append(int(value))
        elif isinstance(value, int):
            if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
                raise js_error("TypeError", BIG_INT, TypeError)
            checked.append(value)
        elif value is None or isinstance(value, (float, str, bytes)):
            checked.append(value)
        elif isinstance(value, tuple | bytearray):
            raise TypeError(f"{type(value)} cannot be sent over RPC.")
        else:
            # Cloudflare would store the text JavaScript makes of it ('[object
            # Object]', '1,2'): refused here, so nothing is stored that way.
            raise TypeError(
                f"binding {index} must be None, bool, int, float, str or bytes, "
                f"got {type(value).__name__}"
            )
    return tuple(checked)


class Cursor(ReadRows[Row]):
    """The rows of one `sql.exec`, already read; consumed as they are iterated.

    `rows_read` counts the rows returned (SQLite does not report rows scanned);
    `rows_written` counts rows inserted, updated or deleted.
    """

    __slots__ = ()

    def _row(self, pairs: Iterable[tuple[str, Any]]) -> Row:
        return Row(pairs)

    def toArray(self) -> list[Row]:
        """`to_list()` under its Cloudflare name."""
        return list(self)

    def one(self) -> Row:
        """The only remaining row; Cloudflare's error unless there is exactly one."""
        try:
            return super().one()
        except ValueError as error:
            raise js_error("Error", str(error), ValueError) from None

    def next(self) -> JsDict:
        """The next row as Cloudflare's iterator step: `{"done": False, "value": row}`,
        then `{"done": True, "value": None}` once the rows are used up."""
        for row in self:
            return JsDict(done=False, value=row)
        return JsDict(done=True, value=None)

    def raw(self) -> RawRows:
        """The remaining rows as tuples, in column order (`toArray()` gives lists)."""
        return RawRows(self._rows)

    @property
    def columnNames(self) -> list[str]:
        """`column_names` under its Cloudflare name."""
        return list(self._columns)

    @property
    def rowsRead(self) -> int:
        """`rows_read` under its Cloudflare name."""
        return self._rows_read

    @property
    def rowsWritten(self) -> int:
        """`rows_written` under its Cloudflare name."""
        return self._rows_written


class RawRows:
    """`cursor.raw()`: iterating gives each row as a tuple; Cloudflare's `toArray()` and
    `next()` give lists, as Cloudflare's SDK does."""

    __slots__ = ("_rows",)

    def __init__(self, rows: Iterator[tuple[Any, ...]]) -> None:
        self._rows = rows

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return self._rows

    def __next__(self) -> tuple[Any, ...]:
        return next(self._rows)

    def toArray(self) -> list[list[Any]]:
        """Every remaining row as a list."""
        return [list(row) for row in self._rows]

    def next(self) -> JsDict:
        """`{"done": False, "value": [...]}` for the next row, then `{"done": True, ...}`."""
        for row in self._rows:
            return JsDict(done=False, value=list(row))
        return JsDict(done=True, value=None)
