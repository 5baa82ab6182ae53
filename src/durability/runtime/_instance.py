"""One live instance of an object: the user object, its ctx, storage and tasks."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from .._faults import FaultSite
from ._calls import CallDelivery
from ._calls import running_instance as running_instance
from ._database import Database
from ._errors import ObjectEvictedError
from ._faults import Faults
from ._ids import ObjectId
from ._object import DurableObject, ObjectContext
from ._platform import Platform
from ._storage import ObjectStorage

if TYPE_CHECKING:
    from ._hibernation import SocketHub

T = TypeVar("T")

logger = logging.getLogger("durability.runtime")


@dataclass(frozen=True, slots=True)
class InstanceHost:
    """What the runtime gives every instance it builds."""

    platform: Platform
    """Builds the `ctx` the user's object gets over the runtime's own."""
    sockets: SocketHub
    """The runtime's hibernatable WebSockets."""
    on_idle: Callable[[Instance], None]
    """Called when the instance has nothing running any more."""
    crash: Callable[[Instance], None]
    """Crashes the instance from inside one of its own calls (`crash_point`)."""
    abort: Callable[[Instance, BaseException], None]
    """Resets the object: `ctx.abort` calls it with the error every call in flight gets."""


class Instance(CallDelivery):
    """A live object: built on first use, dropped by eviction (its tasks cancelled)."""

    def __init__(
        self,
        object_id: ObjectId,
        cls: type[DurableObject],
        env: Any,
        database: Database,
        host: InstanceHost,
    ) -> None:
        super().__init__(object_id, database)
        self.storage = ObjectStorage(database, f"object {object_id.namespace}:{object_id}")
        self.ctx = ObjectContext(self)
        self._cls = cls
        self._env = env
        self.host = host
        self.idle_timer: asyncio.TimerHandle | None = None

    def inject(self, faults: Faults) -> None:
        """Let the runtime's `faults` reach this object's `set_alarm` and (through the
        context of its calls) its logs' cold-store calls."""
        self.fault_site = FaultSite(faults, self.id)
        self.storage.alarm_fault = partial(faults.set_alarm, self.id)

    def user_object(self) -> DurableObject:
        """The user's instance, constructed on first use as `Class(ctx, env)` (the `ctx`
        the platform builds over the runtime's)."""
        if self._object is None:
            try:
                self._object = self._cls(self.host.platform.context(self.ctx), self._env)
            except BaseException:
                # Nothing of a failed construction is reused: the next try gets a new ctx.
                self.ctx = ObjectContext(self)
                raise
        return self._object

    def _idle(self) -> None:
        self.host.on_idle(self)

    def _forget_object(self) -> None:
        """Drop the user's instance (a failed start-up): the next call builds it anew."""
        self._object = None
        self.ctx = ObjectContext(self)

    def keep(self, awaitable: Awaitable[Any]) -> None:
        """`ctx.wait_until`: track background work; its failure is logged, not raised."""
        # Futures and tasks (the common case) skip the slower generic awaitable check.
        if not isinstance(awaitable, asyncio.Future) and not inspect.isawaitable(awaitable):
            raise TypeError(
                f"wait_until needs a coroutine or future, got {type(awaitable).__name__}"
            )
        if self.gone:
            close = getattr(awaitable, "close", None)
            if inspect.iscoroutine(awaitable) and close is not None:
                close()
            raise ObjectEvictedError(
                f"object {self.id.namespace}:{self.id} was evicted: wait_until is refused"
            )
        future = asyncio.ensure_future(awaitable)
        self.idle_since = None
        self.tasks.add(future)
        future.add_done_callback(self._kept_done)

    def _kept_done(self, future: asyncio.Future[Any]) -> None:
        # One callback for both jobs: each one costs a loop turn's handle.
        _log_failure(future)
        self._untrack(future)

    def block_while(self, fn: Callable[[], Awaitable[T] | T]) -> asyncio.Future[T]:
        """`ctx.block_concurrency_while`: see `InputGate.block_while`."""
        return self._input.block_while(fn, self._track_block)

    def _track_block(self, block: asyncio.Future[Any]) -> None:
        self.idle_since = None
        self.tasks.add(block)
        block.add_done_callback(self._untrack)

    def fence(self) -> None:
        """Mark the instance gone: its storage refuses every operation from now on."""
        self.gone = True
        self.storage.fence()

    def cancel_work(
        self, error: BaseException | None = None, *, replies_lost: bool = False
    ) -> list[asyncio.Future[Any]]:
        """Cancel every call and background task; callers waiting get `ObjectEvictedError`.

        Calls gated on a commit that already ended get its outcome (`ObjectEvictedError`
        with `replies_lost`: the object crashed after that commit, before answering); with
        `error` (a failed commit), every other call in flight gets that error instead.
        """
        self._gate.open_ended(self._evicted_during_call() if replies_lost else None)
        # The trackers stay: each call's task, once it ends, still untracks itself.
        for outcome in self._trackers:
            if not outcome.done():
                outcome.set_exception(self._evicted_during_call() if error is None else error)
        pending = list(self.tasks)
        for task in pending:
            task.cancel()
        return pending

    def _untrack(self, future: asyncio.Future[Any]) -> None:
        self.tasks.discard(future)
        if not self.tasks and not self.gone:
            self._idle()


def _log_failure(future: asyncio.Future[Any]) -> None:
    if future.cancelled():
        return
    error = future.exception()
    if error is not None:
        logger.error("ctx.wait_until work failed", exc_info=error)
