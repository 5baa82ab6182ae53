"""One live instance of an object: the user object, its ctx, storage and tasks."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from ._database import Database
from ._errors import ObjectEvictedError
from ._ids import ObjectId
from ._object import DurableObject, ObjectContext
from ._storage import CallRecord, ObjectStorage, begin_call

T = TypeVar("T")

_Gated = tuple[asyncio.Future[Any], asyncio.Future[object], object, bool]
"""A finished call waiting for its commit: its task, outcome, result, whether it raised."""

logger = logging.getLogger("durability.runtime")


class Instance:
    """A live object: built on first use, dropped by eviction (its tasks cancelled)."""

    def __init__(
        self,
        object_id: ObjectId,
        cls: type[DurableObject],
        env: Any,
        database: Database,
        on_idle: Callable[[Instance], None],
    ) -> None:
        self.id = object_id
        self.database = database
        self.storage = ObjectStorage(database, f"object {object_id.namespace}:{object_id}")
        self.ctx = ObjectContext(self)
        self.tasks: set[asyncio.Future[Any]] = set()
        self._outcomes: dict[asyncio.Future[Any], asyncio.Future[object]] = {}
        self._gated: dict[asyncio.Future[None], list[_Gated]] = {}
        self.gone = False
        self._cls = cls
        self._env = env
        self._object: DurableObject | None = None
        self._blocks = 0
        self._unblocked = asyncio.Event()
        self._unblocked.set()
        self._on_idle = on_idle
        self.idle_timer: asyncio.TimerHandle | None = None
        self.idle_since: float | None = None

    def user_object(self) -> DurableObject:
        """The user's instance, constructed on first use as `Class(ctx, env)`."""
        if self._object is None:
            self._object = self._cls(self.ctx, self._env)
        return self._object

    def call(self, invoke: Callable[[DurableObject], object]) -> asyncio.Future[object]:
        """Deliver `invoke` in a task of its own; the returned future gets its outcome.

        The task belongs to the instance (eviction cancels it, and the future then
        fails with `ObjectEvictedError`); cancelling the returned future does not
        cancel the call, as a caller going away does not stop a Durable Object.
        """
        loop = asyncio.get_running_loop()
        outcome: asyncio.Future[object] = loop.create_future()
        task = loop.create_task(self._run_call(invoke, outcome))
        self.idle_since = None
        self.tasks.add(task)
        self._outcomes[task] = outcome
        return outcome

    async def _run_call(
        self, invoke: Callable[[DurableObject], object], outcome: asyncio.Future[object]
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        gated = False
        try:
            while self._blocks:
                await self._unblocked.wait()
            record = begin_call()
            try:
                result = invoke(self.user_object())
                if inspect.isawaitable(result):
                    result = await result
                raised = False
            except Exception as error:
                result, raised = error, True
            try:
                last = self._commits_to_wait(record)
            except Exception as error:
                result, raised, last = error, True, None
            if last is not None:
                # The commit's one done-callback releases every result gated on it, so a
                # call costs no wake-up of its own task after its writes are durable.
                self._gate(last, task, outcome, result, raised)
                gated = True
            else:
                self._release(outcome, result, raised)
        except asyncio.CancelledError:
            if not outcome.done():
                if self.gone:
                    outcome.set_exception(self._evicted_during_call())
                else:
                    outcome.cancel()
            raise
        finally:
            if not gated:
                self._outcomes.pop(task, None)
                self._untrack(task)

    def _commits_to_wait(self, record: CallRecord) -> asyncio.Future[None] | None:
        """The commit the call's result must still wait for (`None`: already durable).

        A commit that already failed raises its error here. Calls that spanned turns may
        have joined several commits; only the newest can still be pending, as the
        database opens a transaction only after the previous one ended.
        """
        # Writes still pending that the call may have observed count as its own.
        pending = self.database.pending_commit
        if pending is not None:
            record.add(pending)
        last: asyncio.Future[None] | None = None
        for commit in record.close():
            if commit.done():
                commit.result()
            else:
                last = commit
        return last

    def _gate(
        self,
        commit: asyncio.Future[None],
        task: asyncio.Future[Any],
        outcome: asyncio.Future[object],
        result: object,
        raised: bool,
    ) -> None:
        waiting = self._gated.get(commit)
        if waiting is None:
            waiting = self._gated[commit] = []
            commit.add_done_callback(self._open_gate)
        waiting.append((task, outcome, result, raised))

    def _open_gate(self, commit: asyncio.Future[None]) -> None:
        error = None if commit.cancelled() else commit.exception()
        for task, outcome, result, raised in self._gated.pop(commit, ()):
            if error is not None:
                self._release(outcome, error, True)
            else:
                self._release(outcome, result, raised)
            self._outcomes.pop(task, None)
            self._untrack(task)

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

    async def block_while(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Hold back every other delivery while `await fn()` runs."""
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {type(fn).__name__}")
        self._blocks += 1
        self._unblocked.clear()
        try:
            return await fn()
        finally:
            self._blocks -= 1
            if not self._blocks:
                self._unblocked.set()

    def fence(self) -> None:
        """Mark the instance gone: its storage refuses every operation from now on."""
        self.gone = True
        self.storage.fence()

    def cancel_work(self) -> list[asyncio.Future[Any]]:
        """Cancel every call and background task; callers waiting get `ObjectEvictedError`."""
        for outcome in self._outcomes.values():
            if not outcome.done():
                outcome.set_exception(self._evicted_during_call())
        self._outcomes.clear()
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
