"""SQL text and values as the Workers SQL API accepts them, and its cursor.

`sql.exec` takes one or more statements; transaction control statements are refused
(the host owns the transaction); bindings are checked as the Workers runtime checks
them (integers must fit in +/-(2**53 - 1), booleans become 0/1).
"""

from __future__ import annotations

import functools
import re
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from .._sql_rows import ReadRows
from .._types import MAX_SAFE_INTEGER


class Row(dict[str, Any]):
    """One result row: a dict, whose columns also read as attributes (`row.name`).

    Cloudflare's rows answer `row.name` under both Python SDKs, so code written for
    Cloudflare reads rows the same way here.
    """

    __slots__ = ()

    def __getattr__(self, column: str) -> Any:
        try:
            return self[column]
        except KeyError:
            raise AttributeError(f"the row has no column {column!r}") from None


MAX_BINDINGS = 100
"""Bound parameters per query, as Cloudflare's SQLite-backed Durable Objects allow."""

MAX_STATEMENT_BYTES = 100_000
"""The longest SQL statement Cloudflare's SQLite-backed Durable Objects accept."""

_FIRST_KEYWORD = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$))*([A-Za-z]+)", re.DOTALL)
_TRANSACTION_KEYWORDS = frozenset({"BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE"})


def first_keyword(statement: str) -> str | None:
    """The first SQL keyword of `statement` (upper case), skipping comments."""
    match = _FIRST_KEYWORD.match(statement)
    return match.group(1).upper() if match else None


def split_statements(query: str) -> list[str]:
    """The statements of `query`, split where SQLite sees a complete statement."""
    if ";" not in query:
        return [query] if first_keyword(query) else []
    statements: list[str] = []
    start = 0
    position = query.find(";")
    while position != -1:
        candidate = query[start : position + 1]
        if sqlite3.complete_statement(candidate):
            if first_keyword(candidate):
                statements.append(candidate)
            start = position + 1
        position = query.find(";", position + 1)
    rest = query[start:]
    if first_keyword(rest):
        statements.append(rest)
    return statements


@functools.lru_cache(maxsize=512)
def parse_query(query: str) -> tuple[str, ...]:
    """The checked statements of `query` (cached: most queries are constant strings)."""
    statements = split_statements(query)
    if not statements:
        raise ValueError("query must contain a SQL statement")
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
    """Refuse transaction control (the host commits each turn) and oversized statements."""
    if len(statement) > MAX_STATEMENT_BYTES // 4 and len(statement.encode()) > (
        MAX_STATEMENT_BYTES
    ):
        raise ValueError(
            f"a SQL statement may be at most {MAX_STATEMENT_BYTES} bytes (the Workers SQL "
            "limit); bind large values instead of inlining them"
        )
    keyword = first_keyword(statement)
    if keyword in _TRANSACTION_KEYWORDS:
        raise ValueError(
            f"{keyword} is not allowed in sql.exec: writes are committed by the runtime; "
            "use ctx.storage.transaction_sync(fn) or await ctx.storage.transaction(fn) "
            "for an atomic group of writes"
        )


_MIN_SAFE_INTEGER = -MAX_SAFE_INTEGER


def check_bindings(bindings: Sequence[object]) -> tuple[object, ...]:
    """Bindings as SQLite gets them; `TypeError` for values the Workers API refuses."""
    if len(bindings) > MAX_BINDINGS:
        raise ValueError(
            f"a query may have at most {MAX_BINDINGS} bindings (the Workers SQL limit), "
            f"got {len(bindings)}"
        )
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
                raise TypeError(
                    f"binding {index} is an integer outside +/-(2**53 - 1), which the "
                    "Workers SQL API cannot bind exactly; store it as TEXT"
                )
            checked.append(value)
        elif value is None or isinstance(value, (float, str, bytes)):
            checked.append(value)
        else:
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
