"""`ctx` of a Cloudflare object as the library's `Context`, and its alarm info.

`waitUntil` is handed a JavaScript promise that settles when the Python task does
(a Python task given directly becomes a proxy that JavaScript destroys after the call);
`blockConcurrencyWhile` gets a proxy callback whose own exception is re-raised.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .._alarm_info import AlarmInvocationInfo
from ._boxed import call_async
from ._ffi import ffi, js, jsnull, to_python
from ._storage import CloudflareStorage

T = TypeVar("T")


class CloudflareId:
    """`ctx.id`: `str(id)` is the 64-hex id; `name` the name it came from, if any."""

    __slots__ = ("_text", "name")

    def __init__(self, object_id: Any) -> None:
        self._text = str(object_id.toString())
        name = to_python(getattr(object_id, "name", None), jsnull())
        self.name: str | None = name if isinstance(name, str) else None

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"CloudflareId({self._text!r}, name={self.name!r})"


class CloudflareContext:
    """The library's `Context` over a Cloudflare Durable Object's `ctx` (either SDK)."""

    __slots__ = ("__weakref__", "_ctx", "_id", "storage")

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self._id: CloudflareId | None = None
        self.storage = CloudflareStorage(ctx.storage)

    @property
    def id(self) -> CloudflareId:
        """The object's id (read from Cloudflare once)."""
        if self._id is None:
            self._id = CloudflareId(self._ctx.id)
        return self._id

    def wait_until(self, awaitable: Awaitable[Any]) -> None:
        """Keep `awaitable` (a coroutine or future) running after the current call.

        It runs as a Python task; Cloudflare waits for a promise that settles when
        the task ends, however it ends.
        """
        if not isinstance(awaitable, asyncio.Future) and not inspect.isawaitable(awaitable):
            raise TypeError(
                f"wait_until needs a coroutine or future, got {type(awaitable).__name__}"
            )
        task = asyncio.ensure_future(awaitable)
        try:
            self._ctx.waitUntil(_settled_promise(task))
        except BaseException:
            task.cancel()
            raise

    async def block_concurrency_while(self, fn: Callable[[], Awaitable[T] | T]) -> T:
        """Run `fn()` (awaiting its result when it is awaitable) while Cloudflare delivers
        nothing else to the object."""
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {type(fn).__name__}")
        return await call_async(self._ctx.blockConcurrencyWhile, fn)


def _settled_promise(task: asyncio.Future[Any]) -> Any:
    """A JavaScript promise resolved once `task` is done (its outcome stays in Python);
    the task itself where there is no JavaScript."""
    scope = js()
    if scope is None:
        return task

    def executor(resolve: Any, reject: Any) -> None:
        task.add_done_callback(lambda _done: resolve())

    return scope.Promise.new(ffi().create_once_callable(executor))


def alarm_info(info: Any) -> Any:
    """`info` with `retry_count`/`is_retry`: Cloudflare's `retryCount`/`isRetry` info is
    converted, `jsnull` becomes `None`, anything else is returned as it is."""
    if info is None or hasattr(info, "retry_count"):
        return info
    count = getattr(info, "retryCount", None)
    if count is not None:
        return AlarmInvocationInfo(retry_count=int(count), is_retry=bool(info.isRetry))
    if info is jsnull():
        return None
    return info
