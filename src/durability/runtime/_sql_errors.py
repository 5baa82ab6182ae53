"""`sql.exec` errors as Cloudflare raises them: a `JsException` whose text is SQLite's
message followed by its result code, e.g. `Error: no such table: t: SQLITE_ERROR`.

Each is also an instance of the error the embedded runtime raised before (the `sqlite3`
error, or `ValueError` / `TypeError` for a refused statement or binding), so code that
caught those keeps working.
"""

from __future__ import annotations

import re
import sqlite3

from ._js_errors import JsException, js_error

TRANSACTION_STATEMENTS = (
    "To execute a transaction, please use the state.storage.transaction() or "
    "state.storage.transactionSync() APIs instead of the SQL BEGIN TRANSACTION or SAVEPOINT "
    "statements. The JavaScript API is safer because it will automatically roll back on "
    "exceptions, and because it interacts correctly with Durable Objects' automatic atomic "
    "write coalescing."
)
NO_STATEMENT = "SQL code did not contain a statement."
ONLY_LAST_HAS_PARAMETERS = (
    "When executing multiple SQL statements in a single call, only the last statement can "
    "have parameters."
)
WRONG_BINDING_COUNT = "Wrong number of parameter bindings for SQL query."
BIG_INT = "Cannot convert a BigInt value to a number"

_NEAR = re.compile(r'^near "(.*)": syntax error$', re.DOTALL)
_TOKENS = re.compile(
    r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\[[^\]]*\]|--[^\n]*|/\*.*?\*/"
    r"|(?P<parameter>\?\d*|[:@$][A-Za-z_0-9]+)",
    re.DOTALL,
)
MAX_PARAMETERS = 100


def _parameter_offset(statement: str) -> int | None:
    """Where the parameter past the limit starts in `statement` (in UTF-8 bytes)."""
    count = 0
    for token in _TOKENS.finditer(statement):
        if token.group("parameter") is not None:
            count += 1
            if count > MAX_PARAMETERS:
                return len(statement[: token.start()].encode("utf-8"))
    return None


def statement_error(message: str, *also: type[BaseException]) -> JsException:
    """A refusal of the statement itself (`Error: <message>`)."""
    return js_error("Error", message, *also)


def from_sqlite(error: sqlite3.Error, statement: str) -> JsException:
    """Cloudflare's error for what SQLite raised running `statement`."""
    if isinstance(error, sqlite3.ProgrammingError) and "bindings" in str(error):
        return js_error("Error", WRONG_BINDING_COUNT, type(error))
    if isinstance(error, sqlite3.DataError) and "too large" in str(error):
        return js_error("Error", "statement too long: SQLITE_TOOBIG", type(error))
    message = str(error)
    near = _NEAR.match(message)
    if near is not None:
        text = statement.lstrip()
        at: int | None = text.encode("utf-8").find(near.group(1).encode("utf-8"))
        if at is not None and at >= 0:
            message += f" at offset {at}"
    elif message == "too many SQL variables":
        at = _parameter_offset(statement.lstrip())
        if at is not None:
            message += f" at offset {at}"
    extended = getattr(error, "sqlite_errorname", None)
    if isinstance(extended, str) and extended.startswith("SQLITE_"):
        primary = "_".join(extended.split("_")[:2])
        message += f": {primary}"
        if extended != primary:
            message += f" (extended: {extended})"
    return js_error("Error", message, type(error))
