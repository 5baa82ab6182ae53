"""Delivering calls to a live instance: in through its input gate, out through its output gate.

`CallDelivery` is the part of `Instance` that runs each call (in a task of its own, or
at once when it cannot suspend), tracks it until it ends, and releases its outcome only
once the writes it made are durable (`OutputGate`). `Instance` adds what the object is:
its user object, its background work and its eviction.
"""

from __future__ import annotations

import asyncio
import inspect
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from contextvars import copy_context
from types import CodeType, CoroutineType
from typing import Any, cast

from .._faults import FaultSite, fault_site
from ._database import Database
from ._errors import DurableObjectAbort, ObjectEvictedError
from ._gate import OutputGate, commits_to_wait
from ._ids import ObjectId
from ._input_gate import InputGate
from ._object import DurableObject
from ._storage import CallRecord, begin_call, current_call

Future = asyncio.Future[object]


def plain_loop(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether `loop` makes its futures and tasks as asyncio's own loop does, so a call may
    build them itself: the loop's `create_future` and `create_task` are Python functions
    around the same constructors (about 0.3 us of a call's CPU on Python 3.11). A task
    factory set on the loop is still asked for each call's task."""
    kind = type(loop)
    return (
        kind.create_future is asyncio.BaseEventLoop.create_future
        and kind.create_task is asyncio.BaseEventLoop.create_task
    )


def running_instance() -> CallDelivery | None:
    """The instance whose call is running in this context (its tasks inherit it): where
    `durability.testing.crash_point` finds the object to crash."""
    record = current_call.get()
    return None if record is None else cast(CallDelivery, record.instance)


class CallDelivery(ABC):
    """The calls of one live instance: delivered in order, tracked, released when durable."""

    def __init__(self, object_id: ObjectId, database: Database) -> None:
        self.id = object_id
        self.database = database
        self.tasks: set[asyncio.Future[Any]] = set()
        self._trackers: dict[asyncio.Future[object], asyncio.Future[Any]] = {}
        """What runs each call in flight, by its outcome: its task, or the outcome itself
        for a direct call."""
        self._gate = OutputGate(self._release, self._done)
        self._waiting = 0
        self.gone = False
        self._object: DurableObject | None = None
        self._input = InputGate()
        self.idle_since: float | None = None
        self.fault_site: FaultSite | None = None
        """The runtime's faults for this object, named in the context of its calls."""
        self._plain_loop = plain_loop(database.loop)

    @abstractmethod
    def user_object(self) -> DurableObject:
        """The user's instance, built on first use."""

    @abstractmethod
    def _idle(self) -> None:
        """Nothing of the instance runs any more."""

    @abstractmethod
    def _forget_object(self) -> None:
        """Drop the user's instance (a failed start-up): the next call builds it anew."""

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
        # The object's own loop, which every call of it runs on: no lookup of the running
        # loop per call (on Python 3.11 each lookup is a `getpid` system call).
        loop = self.database.loop
        plain = self._plain_loop
        outcome: asyncio.Future[object] = (
            asyncio.Future(loop=loop) if plain else loop.create_future()
        )
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
            delivery = self._run_call(invoke, outcome)
            if plain and loop.get_task_factory() is None:
                task: asyncio.Task[None] = asyncio.Task(delivery, loop=loop)
            else:
                task = loop.create_task(delivery)
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
            self._idle()

    def _run_direct(
        self, invoke: Callable[[DurableObject], object], code: CodeType, outcome: Future
    ) -> bool:
        """Run a call that cannot suspend; whether its outcome is still tracked (gated, or
        left to a task)."""
        record = begin_call(self)
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
            record = begin_call(self)
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

    def _evicted_during_call(self) -> ObjectEvictedError:
        return ObjectEvictedError(
            f"object {self.id.namespace}:{self.id} was evicted during the call"
        )
