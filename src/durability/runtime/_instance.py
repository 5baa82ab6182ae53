"""One live instance of an object: the user object, its ctx, storage and tasks."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar, copy_context
from functools import partial
from types import CodeType, CoroutineType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .._faults import Faults, FaultSite, fault_site
from ._database import Database
from ._errors import DurableObjectAbort, ObjectEvictedError
from ._gate import OutputGate, commits_to_wait
from ._ids import ObjectId
from ._input_gate import InputGate
from ._object import DurableObject, ObjectContext
from ._platform import EMBEDDED, Platform
from ._storage import CallRecord, ObjectStorage, begin_call

if TYPE_CHECKING:
    from ._hibernation import SocketHub

T = TypeVar("T")

Future = asyncio.Future[object]

logger = logging.getLogger("durability.runtime")

running_instance: ContextVar[Instance | None] = ContextVar("durability_instance", default=None)
"""The instance whose call is running in this context (its tasks inherit it): where
`durability.testing.crash_point` finds the object to crash."""


class Instance:
    """A live object: built on first use, dropped by eviction (its tasks cancelled)."""

    def __init__(
        self,
        object_id: ObjectId,
        cls: type[DurableObject],
        env: Any,
        database: Database,
        on_idle: Callable[[Instance], None],
        platform: Platform = EMBEDDED,
        crash_hook: Callable[[Instance], None] | None = None,
    ) -> None:
        self.id = object_id
        self.database = database
        self.storage = ObjectStorage(database, f"object {object_id.namespace}:{object_id}")
        self.ctx = ObjectContext(self)
        self.tasks: set[asyncio.Future[Any]] = set()
        self._trackers: dict[asyncio.Future[object], asyncio.Future[Any]] = {}
        """What runs each call in flight, by its outcome: its task, or the outcome itself
        for a direct call."""
        self._gate = OutputGate(self._release, self._done)
        self._waiting = 0
        self.gone = False
        self._cls = cls
        self._env = env
        self._object: DurableObject | None = None
        self._input = InputGate()
        self.on_abort: Callable[[BaseException], None] | None = None
        """Resets the object (set by the runtime): `ctx.abort` calls it with the error
        every call in flight gets."""
        self._on_idle = on_idle
        self._platform = platform
        self.idle_timer: asyncio.TimerHandle | None = None
        self.crash_hook = crash_hook
        """Set by the host: crashes this instance from inside one of its own calls."""
        self.idle_since: float | None = None
        self.socket_hub: SocketHub | None = None
        """The runtime's hibernatable WebSockets (set by the runtime)."""
        self.fault_site: FaultSite | None = None
        """The runtime's faults for this object, named in the context of its calls."""

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
                self._object = self._cls(self._platform.context(self.ctx), self._env)
            except BaseException:
                # Nothing of a failed construction is reused: the next try gets a new ctx.
                self.ctx = ObjectContext(self)
                raise
        return self._object

    def _forget_object(self) -> None:
        """Drop the user's instance (a failed start-up): the next call builds it anew."""
        self._object = None
        self.ctx = ObjectContext(self)

    def call(
        self, invoke: Callable[[DurableObject], object], *, direct: CodeType | None = None
    ) -> asyncio.Future[object]:
        """Deliver `invoke`; the returned future gets its outcome.

        The call runs in a task of its own, which belongs to the instance (eviction
        cancels it, and the future then fails with `ObjectEvictedError`); cancelling the
        returned future does not cancel the call, as a caller going away does not stop a
        Durable Object. `direct` is the code of a method that cannot suspend (no await):
        when no other delivery is waiting, such a call runs at once, in a context of its
        own as its task would, without a task (nothing can interleave with it or
        interrupt it, so this is the order and the outcome the task would give).
        """
        loop = asyncio.get_running_loop()
        outcome: asyncio.Future[object] = loop.create_future()
        self.idle_since = None
        if (
            direct is not None
            and not self._waiting
            and not self._input.closed
            and not self.gone
            and self._object is not None
        ):
            self.tasks.add(outcome)
            self._trackers[outcome] = outcome
            kept = False
            try:
                kept = copy_context().run(self._run_direct, invoke, direct, outcome)
            finally:
                if not kept:
                    self._done(outcome)
        else:
            self._waiting += 1
            task = loop.create_task(self._run_call(invoke, outcome))
            self.tasks.add(task)
            self._trackers[outcome] = task
        return outcome

    def _track(self, tracker: asyncio.Future[Any], outcome: Future) -> None:
        self.tasks.add(tracker)
        self._trackers[outcome] = tracker

    def _done(self, outcome: Future) -> None:
        """The call of `outcome` has ended: stop tracking what ran it."""
        # Keyed by outcome, so a call's task need not look itself up (`current_task`);
        # `_untrack` inline, as this runs once per call.
        tracker = self._trackers.pop(outcome, None)
        tasks = self.tasks
        if tracker is not None:
            tasks.discard(tracker)
        if not tasks and not self.gone:
            self._on_idle(self)

    def _run_direct(
        self, invoke: Callable[[DurableObject], object], code: CodeType, outcome: Future
    ) -> bool:
        """Run a call that cannot suspend; whether its outcome is still tracked (gated, or
        left to a task)."""
        record = begin_call()
        running_instance.set(self)
        if self.fault_site is not None:
            fault_site.set(self.fault_site)
        try:
            target = self._object
            result = invoke(self.user_object() if target is None else target)
            if type(result) is CoroutineType and result.cr_code is code:
                try:
                    result.send(None)
                except StopIteration as finished:
                    result = finished.value
                else:
                    raise AssertionError("a coroutine whose code has no await suspended")
            elif inspect.isawaitable(result):
                # Not the code judged unable to suspend (say an instance attribute
                # shadows the method): it runs in a task, as any awaiting call, and
                # later calls queue behind it until it has started.
                task = asyncio.get_running_loop().create_task(
                    self._await_call(record, result, outcome)
                )
                self._waiting += 1
                self.tasks.discard(outcome)
                self._track(task, outcome)
                return True
            raised = False
        except (Exception, DurableObjectAbort) as error:
            result, raised = error, True
        return self._conclude(record, outcome, result, raised)

    async def _run_call(self, invoke: Callable[[DurableObject], object], outcome: Future) -> None:
        gated = False
        delivered = False
        try:
            if self._input.closed:
                await self._input.wait()
            self._waiting -= 1
            delivered = True
            record = begin_call()
            running_instance.set(self)
            if self.fault_site is not None:
                fault_site.set(self.fault_site)
            try:
                target = self._object
                if target is None:
                    target = await self._input.built(self.user_object, self._forget_object)
                result = invoke(target)
                # Coroutines (the common case) skip the slower generic awaitable check.
                if type(result) is CoroutineType or inspect.isawaitable(result):
                    result = await result
                raised = False
            except (Exception, DurableObjectAbort) as error:
                result, raised = error, True
            gated = self._conclude(record, outcome, result, raised)
        except asyncio.CancelledError:
            self._cancelled(outcome)
            raise
        finally:
            if not delivered:
                self._waiting -= 1
            if not gated:
                self._done(outcome)

    async def _await_call(
        self, record: CallRecord, awaitable: Awaitable[object], outcome: Future
    ) -> None:
        gated = False
        try:
            self._waiting -= 1
            try:
                result = await awaitable
                raised = False
            except (Exception, DurableObjectAbort) as error:
                result, raised = error, True
            gated = self._conclude(record, outcome, result, raised)
        except asyncio.CancelledError:
            self._cancelled(outcome)
            raise
        finally:
            if not gated:
                self._done(outcome)

    def _cancelled(self, outcome: Future) -> None:
        if not outcome.done():
            if self.gone:
                outcome.set_exception(self._evicted_during_call())
            else:
                outcome.cancel()

    def _conclude(
        self,
        record: CallRecord,
        outcome: Future,
        result: object,
        raised: bool,
    ) -> bool:
        """Release the outcome now, or gate it on the commit it waits for (True)."""
        try:
            last = commits_to_wait(self.database, record)
        except Exception as error:
            result, raised, last = error, True, None
        if last is None:
            self._release(outcome, result, raised)
            return False
        self._gate.hold(last, outcome, result, raised)
        return True

    def _release(self, outcome: asyncio.Future[object], result: object, raised: bool) -> None:
        """Hand the call's outcome to its caller (an eviction meanwhile turns it into one)."""
        if outcome.done():
            return
        if raised:
            outcome.set_exception(cast(BaseException, result))
        elif self.gone:
            outcome.set_exception(self._evicted_during_call())
        else:
            outcome.set_result(result)

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

    def _evicted_during_call(self) -> ObjectEvictedError:
        return ObjectEvictedError(
            f"object {self.id.namespace}:{self.id} was evicted during the call"
        )

    def _untrack(self, future: asyncio.Future[Any]) -> None:
        self.tasks.discard(future)
        if not self.tasks and not self.gone:
            self._on_idle(self)


def _log_failure(future: asyncio.Future[Any]) -> None:
    if future.cancelled():
        return
    error = future.exception()
    if error is not None:
        logger.error("ctx.wait_until work failed", exc_info=error)
