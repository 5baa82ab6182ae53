"""What user code sees of the runtime: `DurableObject`, its `ctx`, `AlarmInvocationInfo`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .._alarm_info import AlarmInvocationInfo as AlarmInvocationInfo
from ._ids import ObjectId
from ._storage import ObjectStorage
from ._ws_context import WebSocketMethods

if TYPE_CHECKING:
    from ._instance import Instance

T = TypeVar("T")


class ObjectContext(WebSocketMethods):
    """`ctx`: the object's id, its storage, background work, the input gate and its
    hibernatable WebSockets (`WebSocketMethods`)."""

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

    async def block_concurrency_while(self, fn: Callable[[], Awaitable[T] | T]) -> T:
        """Run `fn()` (awaiting its result when it is awaitable) while no other call or
        alarm is delivered to this object."""
        return await self._instance.block_while(fn)

    # Cloudflare's spelling of the same methods, so a Worker's code runs here unchanged.
    waitUntil = wait_until
    blockConcurrencyWhile = block_concurrency_while


class DurableObject:
    """Base class of the objects a `Runtime` hosts: one instance per id, built on use.

    Public methods are callable through stubs; `alarm(info)` (or `alarm()`) is called
    when the object's alarm comes due. `self.ctx` and `self.env` are set here.
    """

    def __init__(self, ctx: ObjectContext, env: Any) -> None:
        self.ctx = ctx
        self.env = env
