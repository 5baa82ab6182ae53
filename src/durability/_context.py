"""The Durable Object state the engine and capabilities are allowed to use.

This is the one seam between capabilities and hosts: the embedded runtime
(`durability.runtime`) satisfies these protocols, and so does the Cloudflare adapter
over a Cloudflare `ctx` (registered here as a `HostAdapter`, so a helper given the raw
`ctx` adapts it), so a capability never touches sqlite3, files or the loop's clock.

Storage contract (method by method):

- `sql.exec(query, *bindings)` is synchronous and returns a cursor whose rows are
  already read. Bindings are `None`, `int` (within +/-(2**53 - 1)), `float`, `str`,
  `bytes`; `bool` is bound as 0/1. `BEGIN`, `COMMIT`, `ROLLBACK`, `SAVEPOINT` and
  `RELEASE` raise: use the transaction methods.
- Writes made between two awaits are atomic with each other (they belong to one
  implicit transaction that the host commits at the end of the turn).
- `transaction_sync(fn)` runs `fn()` atomically: on an exception every write it made
  is rolled back and the exception propagates unchanged. Calls may nest.
- `await transaction(fn)` runs `await fn(txn)` atomically, with the alarm and KV
  methods on `txn`. `fn` may await only `txn`'s own methods: anything that really
  suspends raises and rolls back, because other work of the object would otherwise
  interleave with an open transaction.
- One alarm per object: `get_alarm()` is `None` when unset; `set_alarm` replaces it;
  `delete_alarm` is idempotent. While `alarm()` runs, `get_alarm()` is `None` unless
  it was set during the run.
- KV values are JSON values; `list` returns keys in ascending order.
- `await sync()` returns once every write made so far is durable (Cloudflare's
  `storage.sync()`); use it before an effect that must not outrun its own record.
- `await delete_all()` empties the object (every table, key and the alarm), then calls
  the hooks registered with `on_delete_all`, in the same turn: the helpers of a live
  instance recreate their tables there, as a new instance's would.
- `on_delete_all(hook)` registers `hook()` (a bound method, held weakly, so a helper
  that is gone is never called) to run after each `delete_all()`.

`ctx.wait_until(task)` is optional: it makes a task the instance's work (eviction
cancels it). Once the instance is gone a host may refuse by raising (the embedded
runtime raises `ObjectEvictedError`); the engine reports such a refusal, or raises it
where the caller must know.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol, TypeVar, runtime_checkable

from ._types import JsonValue, SqlValue, TimeInput

T = TypeVar("T")

Row = dict[str, Any]


@runtime_checkable
class SqlCursor(Protocol):
    """Rows of one statement, iterated as dicts keyed by column name."""

    @property
    def column_names(self) -> list[str]: ...

    @property
    def rows_read(self) -> int: ...

    @property
    def rows_written(self) -> int: ...

    def __iter__(self) -> Iterator[Row]: ...

    def to_list(self) -> list[Row]: ...

    def one(self) -> Row: ...

    def raw(self) -> Iterator[tuple[Any, ...]]: ...


class SqlStorage(Protocol):
    """Synchronous SQL over the object's own database."""

    def exec(self, query: str, *bindings: SqlValue | bool) -> SqlCursor: ...


class AlarmStorage(Protocol):
    """The object's single alarm."""

    async def get_alarm(self) -> int | None: ...

    async def set_alarm(self, scheduled_time: TimeInput) -> None: ...

    async def delete_alarm(self) -> None: ...


class KeyValueStorage(Protocol):
    """The object's key-value pairs (JSON values)."""

    async def get(self, key: str) -> JsonValue: ...

    async def put(self, key: str, value: JsonValue) -> None: ...

    async def delete(self, key: str) -> bool: ...

    async def list(
        self, *, prefix: str | None = None, limit: int | None = None
    ) -> dict[str, JsonValue]: ...


class Transaction(AlarmStorage, KeyValueStorage, Protocol):
    """What `Storage.transaction` hands to its callback."""


class Storage(AlarmStorage, KeyValueStorage, Protocol):
    """`ctx.storage`: SQL, transactions, the alarm and KV."""

    @property
    def sql(self) -> SqlStorage: ...

    def transaction_sync(self, fn: Callable[[], T]) -> T: ...

    async def transaction(self, fn: Callable[[Transaction], Awaitable[T]]) -> T: ...

    async def delete_all(self) -> None: ...

    def on_delete_all(self, hook: Callable[[], object]) -> None: ...

    async def sync(self) -> None: ...


@runtime_checkable
class ObjectIdLike(Protocol):
    """An object id: `str(id)` is stable; `name` is the name it came from, if any."""

    @property
    def name(self) -> str | None: ...


@runtime_checkable
class Context(Protocol):
    """`ctx`: what a Durable Object instance is handed by its host."""

    @property
    def id(self) -> ObjectIdLike: ...

    @property
    def storage(self) -> Storage: ...

    def wait_until(self, awaitable: Awaitable[Any]) -> None: ...

    def block_concurrency_while(self, fn: Callable[[], Awaitable[T]]) -> Awaitable[T]: ...


class DeleteAllHooks:
    """The hooks a host's storage calls after `delete_all()` (see `on_delete_all`)."""

    __slots__ = ("_hooks",)

    def __init__(self) -> None:
        self._hooks: list[weakref.WeakMethod[Callable[[], object]]] = []

    def add(self, hook: Callable[[], object]) -> None:
        """Keep `hook` (a bound method, held weakly)."""
        self._hooks[:] = [reference for reference in self._hooks if reference() is not None]
        self._hooks.append(weakref.WeakMethod(hook))

    def run(self) -> None:
        """Once the object is empty: call the hooks still alive, in order."""
        for reference in list(self._hooks):
            hook = reference()
            if hook is None:
                self._hooks.remove(reference)
            else:
                hook()


UNHANDLED: Any = object()
"""What `HostAdapter.alarm_info` returns for info that is not its host's."""


class HostAdapter(Protocol):
    """Turns another host's own `ctx` and alarm info into the library's (Cloudflare's,
    registered by the package: `register_host`). `adapt` and `host_ctx` return `None`,
    and `alarm_info` returns `UNHANDLED`, for a value that is not that host's."""

    def adapt(self, ctx: Any) -> Context | None:
        """The library's `Context` over `ctx`, if `ctx` is this host's raw `ctx`."""
        ...

    def host_ctx(self, context: Any) -> Any:
        """The host's own `ctx` behind `context`, if `context` adapts one."""
        ...

    def alarm_info(self, info: Any) -> Any:
        """`info` with `retry_count`/`is_retry` (or `None` for the host's null), if it is
        this host's alarm info."""
        ...


_HOSTS: list[HostAdapter] = []


def register_host(adapter: HostAdapter) -> None:
    """Make `as_context`, `host_ctx` and `alarm_info` consult `adapter` (once each)."""
    if adapter not in _HOSTS:
        _HOSTS.append(adapter)


def as_context(context: Any) -> Any:
    """`context` adapted when it is a registered host's raw `ctx`, else unchanged (the
    engine checks the rest)."""
    for host in _HOSTS:
        adapted = host.adapt(context)
        if adapted is not None:
            return adapted
    return context


def host_ctx(context: Any) -> Any:
    """The host's own `ctx` behind `context` (what identifies the object): the raw `ctx`
    an adapted context wraps, else `context` itself."""
    for host in _HOSTS:
        found = host.host_ctx(context)
        if found is not None:
            return found
    return context


def alarm_info(info: Any) -> Any:
    """`info` with `retry_count`/`is_retry` (a registered host's own info converted; a
    host's null becomes `None`), anything else as it is."""
    if info is None or hasattr(info, "retry_count"):
        return info
    for host in _HOSTS:
        converted = host.alarm_info(info)
        if converted is not UNHANDLED:
            return converted
    return info
