"""What user code sees of the runtime: `DurableObject`, its `ctx`, `AlarmInvocationInfo`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, overload

from .._alarm_info import AlarmInvocationInfo as AlarmInvocationInfo
from ._errors import DurableObjectAbort
from ._ids import ObjectId
from ._js_errors import js_error
from ._js_values import js_string
from ._storage import ObjectStorage
from ._ws_context import WebSocketMethods

if TYPE_CHECKING:
    from ._instance import Instance

T = TypeVar("T")


class ObjectContext(WebSocketMethods):
    """`ctx`: the object's id, its storage, background work, the input gate, `abort` and
    its hibernatable WebSockets (`WebSocketMethods`)."""

    __slots__ = ("_instance",)

    def __init__(self, instance: Instance) -> None:
        self._instance = instance

    @property
    def id(self) -> ObjectId:
        """The object's id (`str(ctx.id)` is 64 hex, `ctx.id.name` its name if any)."""
        return self._instance.id

    @property
    def storage(self) -> ObjectStorage:
        """The object's own storage: SQL, transactions, alarm, KV."""
        return self._instance.storage

    def wait_until(self, awaitable: Awaitable[Any]) -> None:
        """Keep `awaitable` (a coroutine or future) running after the call returns.

        It belongs to this instance: eviction cancels it.
        """
        self._instance.keep(awaitable)

    def waitUntil(self, awaitable: object) -> None:
        """`wait_until` under its Cloudflare name; as there, a value that is not awaitable
        is accepted and ignored."""
        if isinstance(awaitable, Awaitable):
            self._instance.keep(awaitable)

    @overload
    def block_concurrency_while(self, fn: Callable[[], Awaitable[T]]) -> Awaitable[T]: ...

    @overload
    def block_concurrency_while(self, fn: Callable[[], T]) -> Awaitable[T]: ...

    def block_concurrency_while(self, fn: Callable[[], Any]) -> Awaitable[Any]:
        """Call `fn()` now and deliver no other call or alarm to this object until its
        result (awaited when it is awaitable) is ready; the returned awaitable gives it.

        Awaiting is optional: called in `__init__` without `await` (the pattern
        Cloudflare's docs show), it still runs before any call is delivered, and if it
        fails, the object is built again for the next call.
        """
        return self._instance.block_while(fn)

    @overload
    def blockConcurrencyWhile(self, fn: Callable[[], Awaitable[T]]) -> Awaitable[T]: ...

    @overload
    def blockConcurrencyWhile(self, fn: Callable[[], T]) -> Awaitable[T]: ...

    def blockConcurrencyWhile(self, fn: Callable[[], Any]) -> Awaitable[Any]:
        """`block_concurrency_while` under its Cloudflare name (with Cloudflare's error
        for an `fn` that is not callable)."""
        if not callable(fn):
            raise js_error(
                "TypeError",
                "Failed to execute 'blockConcurrencyWhile' on 'DurableObjectState': "
                "parameter 1 is not of type 'function'.",
                TypeError,
            )
        return self._instance.block_while(fn)

    def abort(self, reason: object = None) -> NoReturn:
        """Reset the object, as Cloudflare's `ctx.abort` does: its writes not yet
        committed are dropped, every call in flight (this one too) fails with Cloudflare's
        error, and the next call builds a new instance. Raises `DurableObjectAbort`."""
        message = (
            "Application called abort() to reset Durable Object."
            if reason is None
            else js_string(reason)
        )
        instance = self._instance
        if not instance.gone:
            instance.host.abort(instance, js_error("Error", message))
        raise DurableObjectAbort(message)


class DurableObject:
    """Base class of the objects a `Runtime` hosts: one instance per id, built on use.

    Public methods are callable through stubs; `alarm(info)` (or `alarm()`) is called
    when the object's alarm comes due. `self.ctx` and `self.env` are set here.
    """

    def __init__(self, ctx: ObjectContext, env: Any) -> None:
        self.ctx = ctx
        self.env = env


def crosses_as_on_cloudflare(cls: type) -> bool:
    """Whether stub calls to objects of `cls` cross as on Cloudflare: its base class is
    the `workers` stand-in's `DurableObject`, which sets this marker."""
    return bool(getattr(cls, "_durability_crosses_as_on_cloudflare", False))
