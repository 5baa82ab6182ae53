"""`ctx.storage` of the embedded runtime: SQL, transactions, the alarm and KV pairs.

Satisfies `durability._context.Storage` (see its docstring for the contract). Every
operation joins the object's per-turn transaction and records its commit in the
current call, so the call's result waits for it (the output gate). A storage whose
instance was evicted is fenced: every operation raises `ObjectEvictedError`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Generator
from contextvars import ContextVar
from functools import partial
from typing import Any, TypeVar

from .._context import DeleteAllHooks
from .._types import JsonValue, TimeInput
from .._validate import check_callable, to_epoch_ms
from ._alarm_row import AlarmRow, read_alarm, write_alarm
from ._alarm_time import cloudflare_alarm_ms
from ._database import UNREAD, Database
from ._errors import ObjectEvictedError
from ._js_errors import js_error
from ._kv import KeyValue, SyncKeyValue, js_arguments
from ._object_sql import ObjectSql
from ._private_tables import create_private_tables
from ._started import Started, started
from ._transaction import Transaction

T = TypeVar("T")


class CallRecord:
    """One delivered call: the instance it runs in, and the commits it joined (its result
    waits for every one).

    Work the call started (e.g. `wait_until` tasks) inherits the record through the
    task context; once the call settled, the record ignores its commits.
    """

    __slots__ = ("commits", "instance")

    def __init__(self, instance: object) -> None:
        self.instance = instance
        """The live instance the call was delivered to."""
        self.commits: list[asyncio.Future[None]] | None = []
        """The joined commits, oldest first (`ObjectStorage.enter` adds each); `None`
        once the call settled (`commits_to_wait`), after which nothing is recorded."""


current_call: ContextVar[CallRecord | None] = ContextVar("durability_call", default=None)
"""The call running in this context (its tasks inherit it); one variable for both what
a call is and what it joined, so a delivery sets one."""


def begin_call(instance: object) -> CallRecord:
    """Start recording, in the running task's context, the commits a call to `instance`
    joins."""
    record = CallRecord(instance)
    current_call.set(record)
    return record


def _pass_outcome(waiter: asyncio.Future[None], commit: asyncio.Future[None]) -> None:
    """Give `waiter` the outcome of `commit` (unless the waiter was cancelled)."""
    if waiter.done():
        return
    if commit.cancelled():
        waiter.cancel()
        return
    error = commit.exception()
    if error is None:
        waiter.set_result(None)
    else:
        waiter.set_exception(error)


def _refuse_awaitable(result: T) -> T:
    """`transaction_sync`'s result, unless `fn` returned an awaitable (closed, refused)."""
    if inspect.isawaitable(result):
        close = getattr(result, "close", None)
        if close is not None:
            close()
        raise TypeError(
            "transaction_sync(fn): fn returned an awaitable; pass a plain function "
            "or use `await storage.transaction(fn)`"
        )
    return result


def _drive(awaitable: object) -> Any:
    """Run an awaitable to completion without yielding to the loop, or refuse."""
    if not inspect.isawaitable(awaitable):
        return awaitable
    steps: Generator[Any, None, Any] = awaitable.__await__()
    try:
        steps.send(None)
    except StopIteration as finished:
        return finished.value
    close = getattr(steps, "close", None)
    if close is not None:
        close()
    raise RuntimeError(
        "storage.transaction(fn): fn awaited something other than the transaction's own "
        "methods, which would let other work of the object interleave with the open "
        "transaction; it was rolled back. Await only txn.get/put/delete/list and the "
        "txn alarm methods inside a transaction"
    )


class ObjectStorage:
    """`ctx.storage`: the object's SQL database, transactions, its alarm and KV pairs.

    The key-value methods and Cloudflare's spellings (`setAlarm`, `transactionSync`,
    ...) behave as on Cloudflare; the snake_case names are the library's (see
    `durability._context.Storage`).
    """

    def __init__(self, database: Database, owner: str) -> None:
        self._database = database
        self._owner = owner
        self._fenced = False
        self._sql = ObjectSql(self)
        self._kv = KeyValue(self.enter)
        self._sync_kv = SyncKeyValue(self._kv)
        self._emptied = DeleteAllHooks()
        self.alarm_fault: Callable[[int], None] | None = None  # the runtime's Faults.set_alarm

    @property
    def sql(self) -> ObjectSql:
        """Synchronous SQL (`sql.exec`)."""
        return self._sql

    @property
    def kv(self) -> SyncKeyValue:
        """The key-value pairs, read and written synchronously (`kv.get(key)`)."""
        return self._sync_kv

    def fence(self) -> None:
        """Refuse every later operation: the instance that owns this storage is gone."""
        self._fenced = True

    def enter(self) -> Database:
        """The database, with the turn's transaction open and joined by the current call."""
        if self._fenced:
            raise ObjectEvictedError(
                f"{self._owner} was evicted: this ctx is fenced and can no longer use "
                "storage (the next call builds a new instance with its own ctx)"
            )
        commit = self._database.join()
        record = current_call.get()
        if record is not None:
            commits = record.commits
            if commits is not None and (not commits or commits[-1] is not commit):
                commits.append(commit)
        return self._database

    def enter_to_read(self) -> Database:
        """The database for statements that only read: the turn's transaction if one is
        open, else none (a lone read needs no `BEGIN` and `COMMIT`: on the object's one
        connection nothing can write between its statements, and a result it gives is
        still held until every commit it may have read is durable, by the output gate's
        `pending_commit`)."""
        database = self._database
        if self._fenced or database.open_transaction is not None:
            return self.enter()
        if database.pipeline.inflight is not None:
            database.pipeline.settle_inflight()
        return database

    def transaction_sync(self, fn: Callable[[], T]) -> T:
        """Run `fn()` atomically: on an exception its writes are undone and it propagates."""
        check_callable("fn", fn)
        return self._atomically(lambda: _refuse_awaitable(fn()))

    def transactionSync(self, fn: Callable[[], T]) -> T:
        """`transaction_sync` under its Cloudflare name (and with Cloudflare's error for an
        `fn` that is not callable)."""
        if not callable(fn):
            raise js_error("TypeError", _not_a_function("transactionSync"), TypeError)
        return self.transaction_sync(fn)

    async def transaction(self, fn: Callable[[Transaction], Awaitable[T]]) -> T:
        """Run `await fn(txn)` atomically, without letting other work interleave; its
        writes are undone if it raises, or once it returns after `txn.rollback()`."""
        if not callable(fn):
            raise js_error("TypeError", _not_a_function("transaction"), TypeError)
        txn = Transaction(self)
        result: T = self._atomically(lambda: _drive(fn(txn)), lambda: not txn.rolled_back)
        return result

    def _atomically(self, body: Callable[[], T], keep: Callable[[], bool] | None = None) -> T:
        """Run `body()` inside a savepoint of the turn's transaction: all or nothing
        (nothing as well when `keep()` says so once it returned)."""
        database = self.enter()
        savepoint = database.savepoint()
        try:
            result = body()
        except BaseException:
            database.rollback_to(savepoint)
            raise
        if keep is None or keep():
            database.release(savepoint)
        else:
            database.rollback_to(savepoint)
        return result

    async def sync(self) -> None:
        """Wait until every write made so far is durable; raises if their commit failed."""
        if self._fenced:
            self.enter()
        pending = self._database.pending_commit
        if pending is not None:
            self._database.pipeline.syncs.hurry()
            # What `asyncio.shield` does for a future, without its generic layers: the
            # waiter may be cancelled, the commit that other calls wait for is not.
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            pending.add_done_callback(partial(_pass_outcome, waiter))
            await waiter

    async def get_alarm(self) -> int | None:
        """The armed alarm time in ms since the epoch, or `None`."""
        return self._alarm_ms()

    def _alarm_ms(self) -> int | None:
        row = read_alarm(self.enter())
        return row.scheduled_ms if row is not None else None

    async def set_alarm(self, scheduled_time: TimeInput) -> None:
        """Arm the object's one alarm (replacing any other, and any pending retry)."""
        self._arm(to_epoch_ms("scheduled_time", scheduled_time))

    def setAlarm(self, scheduled_time: object, *options: Any, **keywords: Any) -> Started[None]:
        """`set_alarm` as Cloudflare's takes it: ms as an int or float, or a `datetime`
        (a naive one is UTC); other values raise Cloudflare's errors when awaited. As
        each Cloudflare-named method here, it acts when called, awaited or not."""
        return started(lambda: self._arm(cloudflare_alarm_ms(scheduled_time)))

    def _arm(self, scheduled_ms: int) -> None:
        database = self.enter()
        if self.alarm_fault is not None:
            self.alarm_fault(scheduled_ms)
        row = read_alarm(database)
        if row is None:
            write_alarm(database, AlarmRow(scheduled_ms))
        else:
            write_alarm(database, AlarmRow(scheduled_ms, row.retry_ms, row.retry_attempt))

    async def delete_alarm(self) -> None:
        """Disarm the alarm; a no-op when none is armed."""
        self._disarm()

    def _disarm(self) -> None:
        database = self.enter()
        row = read_alarm(database)
        if row is not None and row.scheduled_ms is not None:
            write_alarm(database, AlarmRow(None, row.retry_ms, row.retry_attempt))

    def getAlarm(self, *options: Any, **keywords: Any) -> Started[int | None]:
        """`get_alarm` (Cloudflare's options are accepted and have no effect here)."""
        return started(self._alarm_ms)

    def deleteAlarm(self, *options: Any, **keywords: Any) -> Started[None]:
        """`delete_alarm` (Cloudflare's options are accepted and have no effect here)."""
        return started(self._disarm)

    def get(self, *args: Any, **kwargs: Any) -> Started[Any]:
        """`get(key)`: the value stored under `key`, or `None`; `get([keys])`: a dict of
        the keys found (see `_kv`)."""
        return started(lambda: self._kv.get(js_arguments(args, kwargs)))

    def put(self, *args: Any, **kwargs: Any) -> Started[None]:
        """`put(key, value)`, or `put({key: value, ...})` for several pairs at once."""
        return started(lambda: self._kv.put(js_arguments(args, kwargs)))

    def delete(self, *args: Any, **kwargs: Any) -> Started[Any]:
        """`delete(key)`: True if it existed; `delete([keys])`: how many existed."""
        return started(lambda: self._kv.delete(js_arguments(args, kwargs)))

    def list(self, *args: Any, **kwargs: Any) -> Started[dict[str, JsonValue]]:
        """The pairs in key order, with Cloudflare's options (`prefix`, `limit`, `start`,
        `startAfter`, `end`, `reverse`) given as a dict or as keywords."""
        return started(lambda: self._kv.list(js_arguments(args, kwargs)))

    def on_delete_all(self, hook: Callable[[], object]) -> None:
        """Have `hook()` (a bound method, held weakly) called after each `delete_all()`."""
        self._emptied.add(hook)

    async def delete_all(self) -> None:
        """Drop every table, key and the alarm: the object is as new (its name stays), and
        the helpers of this instance recreate their tables, all in one savepoint (if they
        cannot, nothing is dropped and the error propagates)."""
        self._delete_all()

    def _delete_all(self) -> None:
        database = self.enter()

        def empty() -> None:
            schema = database.query(
                "SELECT type, name FROM sqlite_master WHERE type IN ('table', 'view')"
                " AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name <> '_durability_name'"
                " ORDER BY type = 'table'"
            )
            database.alarm_row = UNREAD
            for kind, name in schema:
                quoted = '"' + name.replace('"', '""') + '"'
                database.execute(f"DROP {kind.upper()} IF EXISTS {quoted}")
            create_private_tables(database)
            self._emptied.run()

        self._atomically(empty)
        database.alarm_changed = True
        database.alarm_row = None

    def deleteAll(self, *options: Any, **keywords: Any) -> Started[None]:
        """`delete_all` under its Cloudflare name (its options must be an object)."""
        if options and isinstance(options[0], str | int | float):
            return started(_refuse(_not_options("deleteAll")))
        return started(self._delete_all)


def _refuse(message: str) -> Callable[[], None]:
    def refuse() -> None:
        raise js_error("TypeError", message, TypeError)

    return refuse


def _not_options(method: str) -> str:
    return (
        f"Failed to execute '{method}' on 'DurableObjectStorage': parameter 1 is not of type "
        "'PutOptions'."
    )


def _not_a_function(method: str) -> str:
    return (
        f"Failed to execute '{method}' on 'DurableObjectStorage': parameter 1 is not of type "
        "'function'."
    )
