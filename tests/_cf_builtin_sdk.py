"""The built-in SDK's `ctx` (raw JavaScript proxies) over the embedded runtime's `ctx`.

See `_cloudflare_double` for what it copies from Cloudflare and what it does not.
"""

from __future__ import annotations

import inspect
import re
import sqlite3
from collections.abc import Callable
from typing import Any

from _cf_ffi import (
    ArrayBuffer,
    JsArray,
    JsDate,
    JsException,
    JsObject,
    JsPromise,
    JsProxy,
    JsTask,
    PyProxy,
    Uint8Array,
    jsnull,
)

MAX_SAFE_INTEGER = 2**53 - 1
MAX_VALUE_BYTES = 2_000_000
TRANSACTION_ERROR = (
    "Error: To execute a transaction, please use the state.storage.transaction() or "
    "state.storage.transactionSync() APIs instead of the SQL BEGIN TRANSACTION or SAVEPOINT "
    "statements. The JavaScript API is safer because it will automatically roll back on "
    "exceptions, and because it interacts correctly with Durable Objects' automatic atomic "
    "write coalescing."
)


def python_error(error: BaseException) -> JsException:
    """How a Python exception comes back out of an async JavaScript call."""
    return JsException(
        "PythonError: Traceback (most recent call last):\n"
        '  File "/lib/python3.13/site-packages/entry.py", line 1, in callback\n'
        f"{type(error).__name__}: {error}"
    )


def _callable_for_later(fn: Any) -> Callable[..., Any]:
    """A callback JavaScript calls after the call that got it returned: a bare Python
    callable was a borrowed proxy, destroyed by then."""
    if isinstance(fn, PyProxy):
        return fn

    def destroyed(*args: Any) -> Any:
        raise JsException(
            "Error: This borrowed proxy was automatically destroyed at the end of a function "
            "call. Try using create_proxy or create_once_callable."
        )

    return destroyed


def _binding(value: Any) -> Any:
    """What the SQL API stores for a value JavaScript received as a binding."""
    if value is None or value is jsnull:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        # Pyodide passes +/-(2**53 - 1) and beyond as a BigInt, which the API refuses.
        if not -MAX_SAFE_INTEGER < value < MAX_SAFE_INTEGER:
            raise JsException("TypeError: Cannot convert a BigInt value to a number")
        return float(value)  # every JavaScript number is bound as REAL
    if isinstance(value, Uint8Array):
        data: Any = value.to_bytes()
    elif isinstance(value, bytes):
        data = str(value)  # a Python proxy, bound by its string form
    elif isinstance(value, float | str):
        data = value
    else:
        raise JsException(f"TypeError: cannot bind a value of type {type(value).__name__}")
    size = (
        len(data.encode()) if isinstance(data, str) else len(data) if isinstance(data, bytes) else 0
    )
    if size > MAX_VALUE_BYTES:
        raise JsException("Error: string or blob too big: SQLITE_TOOBIG")
    return data


def _cell(value: Any) -> Any:
    """A stored value as JavaScript reads it back (raw)."""
    if value is None:
        return jsnull
    if isinstance(value, bytes):
        return ArrayBuffer(value)
    if isinstance(value, int) and not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return float(value)
    if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
        return int(value)  # a JavaScript number with an integral value reaches Python as int
    return value


def _sql_error(error: Exception) -> JsException:
    """A runtime SQL error as Cloudflare reports it."""
    text = str(error)
    if isinstance(error, sqlite3.IntegrityError):
        name = getattr(error, "sqlite_errorname", "SQLITE_CONSTRAINT")
        return JsException(f"Error: {text}: SQLITE_CONSTRAINT (extended: {name})")
    if isinstance(error, sqlite3.Error):
        return JsException(f"Error: {text}: SQLITE_ERROR")
    if "is not allowed in sql.exec" in text:
        return JsException(TRANSACTION_ERROR)
    return JsException(f"Error: {text}")


class RawCursor(JsProxy):
    """`sql.exec`'s cursor: every accessor returns JavaScript values."""

    def __init__(self, columns: list[str], rows: list[list[Any]], read: int, written: int):
        self.columnNames = JsArray(list(columns))
        self._columns = columns
        self._rows = rows
        self.rowsRead = read
        self.rowsWritten = written

    def _take(self) -> list[list[Any]]:
        rows, self._rows = self._rows, []
        return rows

    def _row(self, cells: list[Any]) -> JsObject:
        return JsObject(dict(zip(self._columns, cells, strict=True)))

    def toArray(self) -> JsArray:
        return JsArray([self._row(cells) for cells in self._take()])

    def one(self) -> JsObject:
        rows = self._take()
        if len(rows) != 1:
            got = "no results" if not rows else "multiple results"
            raise JsException(f"Error: Expected exactly one result from SQL query, but got {got}.")
        return self._row(rows[0])

    def raw(self) -> RawRows:
        return RawRows(self._take())

    def next(self) -> JsObject:
        if not self._rows:
            return JsObject({"done": True})
        return JsObject({"done": False, "value": self._row(self._rows.pop(0))})

    def __iter__(self) -> Any:
        return iter([self._row(cells) for cells in self._take()])


class RawRows(JsProxy):
    """`cursor.raw()`: the rows as arrays."""

    def __init__(self, rows: list[list[Any]]) -> None:
        self._rows = rows

    def toArray(self) -> JsArray:
        return JsArray([JsArray(cells) for cells in self._rows])

    def __iter__(self) -> Any:
        return iter([JsArray(cells) for cells in self._rows])


class RawSql(JsProxy):
    """`storage.sql`: synchronous `exec` with positional bindings."""

    def __init__(self, storage: Any) -> None:
        self._storage = storage

    def exec(self, query: str, *bindings: Any) -> RawCursor:
        stored = [_binding(value) for value in bindings]
        try:
            cursor = self._storage.sql.exec(query, *stored)
            columns = cursor.column_names
            rows = [[_cell(value) for value in row] for row in cursor.raw()]
        except (sqlite3.Error, ValueError, TypeError) as error:
            raise _sql_error(error) from None
        written = _rows_written(self._storage.sql, query, cursor.rows_written)
        return RawCursor(columns, rows, cursor.rows_read, written)


_WRITE = re.compile(
    r"\s*(?:INSERT(?:\s+OR\s+\w+)?\s+INTO|REPLACE\s+INTO|(UPDATE)|DELETE\s+FROM)\s+(\w+)",
    re.IGNORECASE,
)


def _rows_written(sql: Any, query: str, changed: int) -> int:
    """Cloudflare's `rowsWritten`: every row changed, plus one per index entry written.

    An INSERT or DELETE writes an entry of every index of its table (a TEXT primary
    key's own index included: three rows inserted into such a table count 6 on
    workerd), an UPDATE only of those over a column it sets. So it is no row count: a
    caller that needs one asks SQLite (`SELECT changes()`, or `RETURNING`).
    """
    match = _WRITE.match(query)
    if match is None or changed == 0 or ";" in query.strip().rstrip(";"):
        return changed
    listed = sql.exec("SELECT name FROM pragma_index_list(?)", match.group(2))
    indexes = [str(row[0]) for row in listed.raw()]
    if match.group(1):
        assignments = re.split(r"\bWHERE\b|\bRETURNING\b", query[match.end() :], flags=re.I)[0]
        assigned = set(re.findall(r"(\w+)\s*=", assignments))
        indexes = [index for index in indexes if assigned & _columns(sql, index)]
    return changed * (1 + len(indexes))


def _columns(sql: Any, index: str) -> set[str]:
    """The columns `index` covers."""
    return {str(row[0]) for row in sql.exec("SELECT name FROM pragma_index_info(?)", index).raw()}


class RawKeys(JsProxy):
    """The alarm and KV methods of storage and of a transaction (raw: `jsnull`, Maps)."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def getAlarm(self) -> JsTask:
        async def get() -> Any:
            at = await self._target.get_alarm()
            return jsnull if at is None else at

        return JsTask(get())

    def setAlarm(self, scheduled: Any) -> JsTask:
        if isinstance(scheduled, JsDate):
            scheduled = scheduled.getTime()
        if isinstance(scheduled, bool) or not isinstance(scheduled, int | float):
            raise JsException(
                "TypeError: Failed to execute 'setAlarm' on 'DurableObjectStorage': "
                "parameter 1 is not of type 'date'."
            )
        return JsTask(self._target.set_alarm(int(scheduled)))

    def deleteAlarm(self) -> JsTask:
        return JsTask(self._target.delete_alarm())

    def get(self, key: str) -> JsTask:
        async def get() -> Any:
            value = await self._target.get(key)
            return _js_value(value)

        return JsTask(get())

    def put(self, key: str, value: Any) -> JsTask:
        if isinstance(value, dict | list):
            raise JsException("DataCloneError: [object Object] could not be cloned.")
        return JsTask(self._target.put(key, _stored_value(value)))

    def delete(self, key: str) -> JsTask:
        return JsTask(self._target.delete(key))

    def list(self, options: Any = None) -> JsTask:
        given = options.to_py() if isinstance(options, JsObject) else {}

        async def pairs() -> Any:
            found = await self._target.list(given)
            return JsObject({key: _js_value(value) for key, value in found.items()})

        return JsTask(pairs())


def _stored_value(value: Any) -> Any:
    """A JavaScript value as the KV store keeps it (`null` is JSON null)."""
    if value is jsnull:
        return None
    if isinstance(value, JsProxy):
        return _stored_value(value.to_py())  # type: ignore[attr-defined]  # arrays, objects
    if isinstance(value, dict):
        return {key: _stored_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_stored_value(item) for item in value]
    return value


def _js_value(value: Any) -> Any:
    """A stored JSON value as JavaScript hands it back."""
    if isinstance(value, dict):
        return JsObject({key: _js_value(item) for key, item in value.items()})
    if isinstance(value, list):
        return JsArray([_js_value(item) for item in value])
    return jsnull if value is None else value


class RawTransaction(RawKeys):
    """The transaction object JavaScript passes to a `transaction` callback."""


class RawStorage(RawKeys):
    """`ctx.storage` of the built-in SDK."""

    def __init__(self, storage: Any) -> None:
        super().__init__(storage)
        self.sql = RawSql(storage)

    def transactionSync(self, fn: Any) -> Any:
        return self._target.transaction_sync(lambda: fn())

    def transaction(self, fn: Any) -> JsTask:
        callback = _callable_for_later(fn)

        async def run() -> Any:
            failed: list[BaseException] = []

            async def body(txn: Any) -> Any:
                try:
                    return await callback(RawTransaction(txn))
                except Exception as error:
                    failed.append(error)
                    raise

            try:
                return await self._target.transaction(body)
            except Exception as error:
                if failed and error is failed[0]:
                    raise python_error(error) from None
                raise

        return JsTask(run())

    def deleteAll(self) -> JsTask:
        return JsTask(self._target.delete_all())

    def sync(self) -> JsTask:
        return JsTask(self._target.sync())


class RawId(JsProxy):
    """A DurableObjectId: `toString()` and `name` (undefined, i.e. `None`, without one)."""

    def __init__(self, object_id: Any) -> None:
        self._text = str(object_id)
        self.name = object_id.name

    def toString(self) -> str:
        return self._text

    def __str__(self) -> str:
        return self._text


class RawAlarmInfo(JsProxy):
    """What Cloudflare passes to `alarm()`: `retryCount` and `isRetry` only."""

    def __init__(self, retry_count: int, is_retry: bool) -> None:
        self.retryCount = retry_count
        self.isRetry = is_retry


class RawContext(JsProxy):
    """`ctx` of the built-in SDK, over the embedded runtime's ctx."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self.storage = RawStorage(ctx.storage)
        self.id = RawId(ctx.id)
        self.complaints: list[str] = []

    def waitUntil(self, promise: Any) -> None:
        if inspect.iscoroutine(promise):
            promise.close()
            raise TypeError(
                "waitUntil got a bare coroutine, which is never scheduled: "
                "RuntimeWarning: coroutine was never awaited"
            )
        if isinstance(promise, JsPromise):
            self._ctx.wait_until(promise)
            return
        self.complaints.append("This borrowed proxy was automatically destroyed")

    def blockConcurrencyWhile(self, fn: Any) -> JsTask:
        callback = _callable_for_later(fn)

        async def run() -> Any:
            try:
                return await callback()
            except Exception as error:
                raise python_error(error) from None

        return JsTask(self._ctx.block_concurrency_while(run))
