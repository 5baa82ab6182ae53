"""`ctx.storage` of a Cloudflare object under the library's names and plain values.

Cloudflare spells every method in camelCase, answers `jsnull` for "no alarm" and
"no value", and turns an exception raised inside `transaction` into a JavaScript
error; this wraps both SDK flavours (raw proxies, or the `workers-runtime-sdk`
wrappers) so the library sees `None`, ints, dicts and its own exceptions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .._context import DeleteAllHooks, Transaction
from .._types import JsonValue, TimeInput
from .._validate import check_callable, check_positive_int, to_epoch_ms
from ._boxed import call_async, call_sync
from ._ffi import is_js_proxy, jsnull, to_js_value, to_python
from ._sql import CloudflareSql

T = TypeVar("T")


class CloudflareKeys:
    """The alarm and KV methods `storage` and a transaction share."""

    __slots__ = ("_raw", "_target")

    def __init__(self, target: Any) -> None:
        self._target = target
        self._raw = is_js_proxy(target)

    async def get_alarm(self) -> int | None:
        """The armed alarm in ms since the epoch, or `None` (Cloudflare says `jsnull`)."""
        scheduled = to_python(await self._target.getAlarm(), jsnull())
        return None if scheduled is None else int(scheduled)

    async def set_alarm(self, scheduled_time: TimeInput) -> None:
        """Arm the object's one alarm (an int in ms, or an aware datetime)."""
        await self._target.setAlarm(to_epoch_ms("scheduled_time", scheduled_time))

    async def delete_alarm(self) -> None:
        """Disarm the alarm (nothing happens when none is armed)."""
        await self._target.deleteAlarm()

    async def get(self, key: str) -> JsonValue:
        """The value stored under `key`, or `None`."""
        value: JsonValue = to_python(await self._target.get(key), jsnull())
        return value

    async def put(self, key: str, value: JsonValue) -> None:
        """Store `value` (a JSON value) under `key`."""
        await self._target.put(key, to_js_value(value, self._raw))

    async def delete(self, key: str) -> bool:
        """Delete `key`; whether it existed."""
        return bool(await self._target.delete(key))

    async def list(
        self, *, prefix: str | None = None, limit: int | None = None
    ) -> dict[str, JsonValue]:
        """The pairs whose key starts with `prefix`, in key order, at most `limit`."""
        options: dict[str, JsonValue] = {}
        if prefix is not None:
            options["prefix"] = prefix
        if limit is not None:
            options["limit"] = check_positive_int("limit", limit)
        found = to_python(await self._target.list(to_js_value(options, self._raw)), jsnull())
        return {str(key): found[key] for key in sorted(found)}


class CloudflareStorage(CloudflareKeys):
    """The library's `Storage` over Cloudflare's `ctx.storage`."""

    __slots__ = ("_emptied", "sql")

    def __init__(self, storage: Any) -> None:
        super().__init__(storage)
        self.sql = CloudflareSql(storage.sql, self._raw)
        self._emptied = DeleteAllHooks()

    def transaction_sync(self, fn: Callable[[], T]) -> T:
        """`transactionSync(fn)`: atomic; `fn`'s own exception propagates."""
        check_callable("fn", fn)
        return call_sync(self._target.transactionSync, fn)

    async def transaction(self, fn: Callable[[Transaction], Awaitable[T]]) -> T:
        """`transaction(fn)`: `await fn(txn)` atomically; `fn`'s own exception propagates."""
        check_callable("fn", fn)
        return await call_async(
            self._target.transaction, lambda txn: fn(CloudflareTransaction(txn))
        )

    def on_delete_all(self, hook: Callable[[], object]) -> None:
        """Have `hook()` (a bound method, held weakly) called after each `delete_all()`."""
        self._emptied.add(hook)

    async def delete_all(self) -> None:
        """Delete every table, key and the alarm (Cloudflare's `deleteAll` may leave the
        alarm armed, so it is deleted as well); then the helpers of this instance
        recreate their tables."""
        await self._target.deleteAll()
        await self._target.deleteAlarm()
        self._emptied.run()

    async def sync(self) -> None:
        """Return once every write made so far is durable."""
        await self._target.sync()


class CloudflareTransaction(CloudflareKeys):
    """What `transaction` hands its callback: Cloudflare's transaction object, adapted."""

    __slots__ = ()
