"""`ctx.storage` of the embedded runtime: SQL, transactions, the alarm and KV pairs.

Satisfies `durability._context.Storage` (see its docstring for the contract). Every
operation joins the object's per-turn transaction and records its commit in the
current call, so the call's result waits for it (the output gate). A storage whose
instance was evicted is fenced: every operation raises `ObjectEvictedError`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
from collections.abc import Awaitable, Callable, Generator
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar, cast

from .._context import DeleteAllHooks, Transaction
from .._serialization import check_json_value, check_size, to_json_text
from .._types import JsonValue, SqlValue, TimeInput
from .._validate import check_callable, check_positive_int, to_epoch_ms
from ._database import UNREAD, Database
from ._errors import ObjectEvictedError
from ._private_tables import create_private_tables
from ._sql import (
    Cursor,
    check_bindings,
    names_alarm_table,
    parse_query,
    refuse_alarm_trigger,
)

T = TypeVar("T")

MAX_ALARM_RETRIES = 6
"""Retries after a raising `alarm()` (7 calls in all), as on Cloudflare."""

FIRST_RETRY_DELAY_MS = 2_000
"""The first retry waits 2 s; each further one waits twice as long."""


class CallRecord:
    """The commits one delivered call joined; its result waits for every one.

    Work the call started (e.g. `wait_until` tasks) inherits the record through the
    task context; once the call settled, the record ignores it.
    """

    __slots__ = ("commits",)

    def __init__(self) -> None:
        self.commits: list[asyncio.Future[None]] | None = []
        """The joined commits, oldest first (`ObjectStorage.enter` adds each); `None`
        once the call settled (`commits_to_wait`), after which nothing is recorded."""


_current_call: ContextVar[CallRecord | None] = ContextVar("durability_call", default=None)


def begin_call() -> CallRecord:
    """Start recording, in the running task's context, the commits a call joins."""
    record = CallRecord()
    _current_call.set(record)
    return record


@dataclass(frozen=True, slots=True)
class AlarmRow:
    """The persisted alarm: the user's alarm, and the runtime's pending retry."""

    scheduled_ms: int | None
    retry_ms: int | None = None
    retry_attempt: int = 0

    @property
    def wake_ms(self) -> int | None:
        """When the runtime must look at this object next."""
        times = [t for t in (self.scheduled_ms, self.retry_ms) if t is not None]
        return min(times) if times else None


def read_alarm(database: Database) -> AlarmRow | None:
    """The stored alarm row (`None` when nothing is armed), as the open transaction sees it.

    Every write of the row goes through `write_alarm`, so the database keeps the last row
    read or written and forgets it whenever a rollback may have undone a write. A commit
    still running in a worker thread is waited for first: if it fails, its rollback
    undoes the writes the kept row may show.
    """
    database.settle()
    cached = database.alarm_row
    if cached is not UNREAD:
        return cast("AlarmRow | None", cached)
    rows = database.query(
        "SELECT scheduled_ms, retry_ms, retry_attempt FROM _durability_alarm WHERE id = 1"
    )
    row = AlarmRow(*rows[0]) if rows else None
    database.alarm_row = row
    return row


def write_alarm(database: Database, row: AlarmRow | None) -> asyncio.Future[None]:
    """Store `row` (deleting it when it arms nothing) in the turn's transaction."""
    commit = database.join()
    if row is None or row.wake_ms is None:
        database.execute("DELETE FROM _durability_alarm WHERE id = 1")
    else:
        database.execute(
            "INSERT INTO _durability_alarm (id, scheduled_ms, retry_ms, retry_attempt)"
            " VALUES (1, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET scheduled_ms ="
            " excluded.scheduled_ms, retry_ms = excluded.retry_ms,"
            " retry_attempt = excluded.retry_attempt",
            row.scheduled_ms,
            row.retry_ms,
            row.retry_attempt,
        )
    database.alarm_changed = True
    database.alarm_row = None if row is None or row.wake_ms is None else row
    return commit


def retry_delay_ms(attempt: int) -> int:
    """The backoff before retry number `attempt` (1-based): 2 s, 4 s, 8 s, ..."""
    return FIRST_RETRY_DELAY_MS << (attempt - 1)


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


def _prefix_end(prefix: str) -> str | None:
    """The smallest string above every string starting with `prefix` (None: unbounded)."""
    stem = prefix.rstrip(chr(sys.maxunicode))
    if not stem:
        return None
    following = ord(stem[-1]) + 1
    if 0xD800 <= following <= 0xDFFF:
        following = 0xE000
    return stem[:-1] + chr(following)


def _check_key(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError(f"key must be a string, got {type(key).__name__}")
    return key


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


class ObjectSql:
    """`ctx.storage.sql`: synchronous SQL over the object's own database (a `SqlStorage`)."""

    __slots__ = ("_storage",)

    def __init__(self, storage: ObjectStorage) -> None:
        self._storage = storage

    def exec(self, query: str, *bindings: SqlValue | bool) -> Cursor:
        """Run `query` (one or more statements) now; the cursor holds the last one's rows."""
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, got {type(query).__name__}")
        checked = check_bindings(bindings)
        statements = parse_query(query)
        if checked and len(statements) > 1:
            raise ValueError("bindings are only allowed when the query is a single statement")
        if not names_alarm_table(query):
            return self._storage.enter().run(statements, checked)
        refuse_alarm_trigger(statements)
        database = self._storage.enter()
        try:
            return database.run(statements, checked)
        finally:
            # SQL on the alarm table itself: read the row again, and let the commit
            # update the alarm's timer and catalog entry as `set_alarm` would.
            database.alarm_row = UNREAD
            database.alarm_changed = True


class ObjectStorage:
    """`ctx.storage`: the object's SQL database, transactions, its alarm and KV pairs."""

    def __init__(self, database: Database, owner: str) -> None:
        self._database = database
        self._owner = owner
        self._fenced = False
        self._sql = ObjectSql(self)
        self._transaction = _Transaction(self)
        self._emptied = DeleteAllHooks()
        self.alarm_fault: Callable[[int], None] | None = None  # the runtime's Faults.set_alarm

    @property
    def sql(self) -> ObjectSql:
        """Synchronous SQL (`sql.exec`)."""
        return self._sql

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
        record = _current_call.get()
        if record is not None:
            commits = record.commits
            if commits is not None and (not commits or commits[-1] is not commit):
                commits.append(commit)
        return self._database

    def transaction_sync(self, fn: Callable[[], T]) -> T:
        """Run `fn()` atomically: on an exception its writes are undone and it propagates."""
        check_callable("fn", fn)
        return self._atomically(lambda: _refuse_awaitable(fn()))

    async def transaction(self, fn: Callable[[Transaction], Awaitable[T]]) -> T:
        """Run `await fn(txn)` atomically, without letting other work interleave."""
        check_callable("fn", fn)
        result: T = self._atomically(lambda: _drive(fn(self._transaction)))
        return result

    def _atomically(self, body: Callable[[], T]) -> T:
        """Run `body()` inside a savepoint of the turn's transaction: all or nothing."""
        database = self.enter()
        savepoint = database.savepoint()
        try:
            result = body()
        except BaseException:
            database.rollback_to(savepoint)
            raise
        database.release(savepoint)
        return result

    async def sync(self) -> None:
        """Wait until every write made so far is durable; raises if their commit failed."""
        if self._fenced:
            self.enter()
        pending = self._database.pending_commit
        if pending is not None:
            # What `asyncio.shield` does for a future, without its generic layers: the
            # waiter may be cancelled, the commit that other calls wait for is not.
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            pending.add_done_callback(partial(_pass_outcome, waiter))
            await waiter

    async def get_alarm(self) -> int | None:
        """The armed alarm time in ms since the epoch, or `None`."""
        row = read_alarm(self.enter())
        return row.scheduled_ms if row is not None else None

    async def set_alarm(self, scheduled_time: TimeInput) -> None:
        """Arm the object's one alarm (replacing any other, and any pending retry)."""
        scheduled_ms = to_epoch_ms("scheduled_time", scheduled_time)
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
        database = self.enter()
        row = read_alarm(database)
        if row is not None and row.scheduled_ms is not None:
            write_alarm(database, AlarmRow(None, row.retry_ms, row.retry_attempt))

    async def get(self, key: str) -> JsonValue:
        """The value stored under `key`, or `None`."""
        _check_key(key)
        rows = self.enter().query("SELECT value FROM _durability_kv WHERE key = ?", key)
        if not rows:
            return None
        value: JsonValue = json.loads(rows[0][0])
        return value

    async def put(self, key: str, value: JsonValue) -> None:
        """Store a JSON value under `key`."""
        _check_key(key)
        text = to_json_text(check_json_value(value, "value"))
        check_size("value", text, key)
        self.enter().execute(
            "INSERT INTO _durability_kv (key, value) VALUES (?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            key,
            text,
        )

    async def delete(self, key: str) -> bool:
        """Remove `key`; True if it existed."""
        _check_key(key)
        return self.enter().execute("DELETE FROM _durability_kv WHERE key = ?", key) > 0

    async def list(
        self, *, prefix: str | None = None, limit: int | None = None
    ) -> dict[str, JsonValue]:
        """Pairs in ascending key order, optionally only keys starting with `prefix`."""
        if prefix is not None and not isinstance(prefix, str):
            raise TypeError(f"prefix must be a string, got {type(prefix).__name__}")
        count = -1 if limit is None else check_positive_int("limit", limit)
        start = prefix or ""
        end = _prefix_end(start)
        rows = self.enter().query(
            "SELECT key, value FROM _durability_kv WHERE key >= ? AND (? IS NULL OR key < ?)"
            " AND substr(key, 1, ?) = ? ORDER BY key LIMIT ?",
            start,
            end,
            end,
            len(start),
            start,
            count,
        )
        return {key: json.loads(text) for key, text in rows}

    def on_delete_all(self, hook: Callable[[], object]) -> None:
        """Have `hook()` (a bound method, held weakly) called after each `delete_all()`."""
        self._emptied.add(hook)

    async def delete_all(self) -> None:
        """Drop every table, key and the alarm: the object is as new (its name stays), and
        the helpers of this instance recreate their tables, all in one savepoint (if they
        cannot, nothing is dropped and the error propagates)."""
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

    # Cloudflare's spelling of the same methods, so a Worker's code runs here unchanged.
    transactionSync = transaction_sync
    getAlarm = get_alarm
    setAlarm = set_alarm
    deleteAlarm = delete_alarm
    deleteAll = delete_all


class _Transaction:
    """What `storage.transaction` hands its callback: the alarm and KV methods."""

    __slots__ = ("_storage",)

    def __init__(self, storage: ObjectStorage) -> None:
        self._storage = storage

    async def get_alarm(self) -> int | None:
        return await self._storage.get_alarm()

    async def set_alarm(self, scheduled_time: TimeInput) -> None:
        await self._storage.set_alarm(scheduled_time)

    async def delete_alarm(self) -> None:
        await self._storage.delete_alarm()

    async def get(self, key: str) -> JsonValue:
        return await self._storage.get(key)

    async def put(self, key: str, value: JsonValue) -> None:
        await self._storage.put(key, value)

    async def delete(self, key: str) -> bool:
        return await self._storage.delete(key)

    async def list(
        self, *, prefix: str | None = None, limit: int | None = None
    ) -> dict[str, JsonValue]:
        return await self._storage.list(prefix=prefix, limit=limit)

    getAlarm = get_alarm
    setAlarm = set_alarm
    deleteAlarm = delete_alarm
