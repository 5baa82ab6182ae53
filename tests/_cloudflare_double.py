"""A double of a Cloudflare Python Durable Object's `ctx`, as observed on workerd.

It stands between an object and the embedded runtime's ctx (so data lives in the
runtime's real SQLite database, and eviction, restarts and alarm delivery are the
runtime's) and shows only what Cloudflare shows, in one of two flavours:

- `BUILTIN`: the SDK built into workerd hands out raw JavaScript proxies: rows are not
  subscriptable, NULL and "no alarm" are `jsnull`, BLOBs are ArrayBuffers, a Python
  `bytes` binding is stored as the text "b'...'", a callback passed without
  `create_proxy` is destroyed before JavaScript calls it later.
- `WORKERS_SDK`: `workers-runtime-sdk` (what pywrangler vendors) wraps ctx and storage,
  converting arguments (bytes to BLOBs, dicts, `None`) and results (`None`, `JsDict`
  rows, `memoryview` BLOBs); the transaction handed to a callback is still raw.

Both: camelCase names only; `sql.exec` errors are `JsException`s with Cloudflare's
messages; `True` is stored as the text 'true'; an int beyond +/-(2**53 - 1) cannot be
bound; an exception raised inside `transaction` or `blockConcurrencyWhile` comes back
as `JsException: PythonError`; `waitUntil` refuses a bare coroutine and complains about
a Python task; the alarm info has only `retryCount`/`isRetry`.

Not copied: Cloudflare ends every task of an instance it resets, and the runtime
cancels the work it tracks when `rt.evict` drops an instance; but a Python task handed
to `waitUntil` as a promise is not the runtime's to cancel, so in the double it runs on
after eviction, against storage the runtime has fenced (its writes fail).
"""

from __future__ import annotations

import datetime
import inspect
import sqlite3
import sys
from collections.abc import Callable
from typing import Any

import pytest

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
    modules,
)
from durability.runtime import _alarm_driver
from durability.runtime._instance import Instance

BUILTIN = "builtin-sdk"
WORKERS_SDK = "workers-sdk"

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
        if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            raise JsException("TypeError: Cannot convert a BigInt value to a number")
        return value
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
            got = "no results" if not rows else f"{len(rows)} results"
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
        return RawCursor(columns, rows, cursor.rows_read, cursor.rows_written)


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
            found = await self._target.list(prefix=given.get("prefix"), limit=given.get("limit"))
            return JsObject({key: _js_value(value) for key, value in found.items()})

        return JsTask(pairs())


def _stored_value(value: Any) -> Any:
    """A JavaScript value as the KV store keeps it (`null` is JSON null)."""
    if value is jsnull:
        return None
    if isinstance(value, JsProxy):
        return _stored_value(value.to_py())
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


class JsDict(dict[str, Any]):
    """The wrapping SDK's dict: keys also readable as attributes."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _from_rpc(value: Any) -> Any:
    """`python_from_rpc`: JavaScript values to Python (`None`, JsDict, memoryview)."""
    if value is jsnull:
        return None
    if isinstance(value, JsArray):
        return [_from_rpc(item) for item in value]
    if isinstance(value, JsObject):
        return JsDict({key: _from_rpc(item) for key, item in value.__dict__["_entries"].items()})
    if isinstance(value, ArrayBuffer):
        return memoryview(value.to_bytes())
    return value


def _to_rpc(value: Any) -> Any:
    """`python_to_rpc`: Python arguments to JavaScript values."""
    if value is None:
        return jsnull
    if isinstance(value, Wrapped):
        return value._target
    if isinstance(value, JsProxy):
        return value
    if isinstance(value, tuple | bytearray):
        raise TypeError(f"{type(value)} cannot be sent over RPC.")
    if inspect.isawaitable(value):
        raise TypeError(f"Awaitable {type(value)} cannot be sent over RPC.")
    if callable(value):
        return PyProxy(value)
    if isinstance(value, bytes | memoryview):
        return Uint8Array(bytes(value))
    if isinstance(value, datetime.datetime):
        return JsDate(value.timestamp() * 1000)
    if isinstance(value, dict):
        return JsObject({key: _to_rpc(item) for key, item in value.items()})
    if isinstance(value, list):
        return JsArray([_to_rpc(item) for item in value])
    return value


class Wrapped:
    """`_BindingWrapper` of `workers-runtime-sdk`: converts every argument and result."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def _result(self, value: Any) -> Any:
        converted = _from_rpc(value)
        if isinstance(converted, JsProxy) and not isinstance(converted, JsTask):
            return Wrapped(converted)
        return converted

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._target, name)
        if not callable(attribute):
            return self._result(attribute)

        def call(*args: Any) -> Any:
            result = attribute(*[_to_rpc(arg) for arg in args])
            if isinstance(result, JsTask):

                async def settled() -> Any:
                    return self._result(await result)

                return settled()
            return self._result(result)

        return call

    def __iter__(self) -> Any:
        return (self._result(item) for item in self._target)


class WorkersContext:
    """`DurableObjectContext` of `workers-runtime-sdk`: `storage` wrapped, the rest raw."""

    def __init__(self, ctx: RawContext) -> None:
        self._ctx = ctx
        self.storage = Wrapped(ctx.storage)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


def cloudflare_ctx(ctx: Any, flavour: str) -> Any:
    """The Cloudflare `ctx` an object would get, in `flavour`, over the runtime's `ctx`."""
    raw = RawContext(ctx)
    return raw if flavour == BUILTIN else WorkersContext(raw)


def install(monkeypatch: pytest.MonkeyPatch, flavour: str) -> list[RawContext]:
    """Host every object the runtime builds as on Cloudflare: its `ctx` is the double,
    its alarm info Cloudflare's, and `js`/`pyodide` importable. Returns the list every
    double made from now on is added to (to check their `complaints` afterwards)."""
    for name, module in modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    made: list[RawContext] = []

    def user_object(self: Instance) -> Any:
        if self._object is None:
            ctx = cloudflare_ctx(self.ctx, flavour)
            made.append(ctx if isinstance(ctx, RawContext) else ctx._ctx)
            self._object = self._cls(ctx, self._env)
        return self._object

    monkeypatch.setattr(Instance, "user_object", user_object)
    monkeypatch.setattr(
        _alarm_driver,
        "AlarmInvocationInfo",
        lambda retry_count, is_retry: RawAlarmInfo(retry_count, is_retry),
    )
    return made
