"""Background work of one object instance: its tasks belong to the host.

Every task the engine starts is handed to `context.wait_until` when the host has it, so
the host counts it as live work and cancels it on eviction. A host refuses new work
once the instance is gone (the embedded runtime raises `ObjectEvictedError`); only the
host's own call sits inside the code that handles such a refusal.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from .lifecycle import Emit, LifecycleHook, create_emitter, report_failure

T = TypeVar("T")

BACKGROUND_FAILED = "durability.background_execution.failed"


class InstanceTasks:
    """Starts tasks as instance work: `spawn` raises a refusal, the others report it."""

    __slots__ = ("_held", "_keep")

    def __init__(self, context: object) -> None:
        self._keep: Callable[[Awaitable[Any]], None] | None = getattr(context, "wait_until", None)
        self._held: set[asyncio.Task[Any]] = set()

    def spawn(self, awaitable: Awaitable[T]) -> asyncio.Task[T]:
        """Run `awaitable` as a task of the instance; a refused task is cancelled and the
        host's refusal raised."""
        task: asyncio.Task[T] = asyncio.ensure_future(awaitable)
        refusal = self._hand_over(task)
        if refusal is not None:
            raise refusal
        return task

    def try_spawn(self, awaitable: Awaitable[Any]) -> Exception | None:
        """`spawn`, returning the host's refusal instead of raising it (`None` if taken)."""
        return self._hand_over(asyncio.ensure_future(awaitable))

    def _hand_over(self, task: asyncio.Task[Any]) -> Exception | None:
        keep = self._keep
        if keep is None:
            # Nobody else holds the task: keep it from being garbage collected.
            self._held.add(task)
            task.add_done_callback(self._held.discard)
            return None
        try:
            keep(task)
        except BaseException as refusal:  # only the host's call: what it raises is its refusal
            task.cancel()
            if isinstance(refusal, Exception):
                return refusal
            raise
        return None

    def wait_until(
        self,
        awaitable: Awaitable[Any],
        event: str = BACKGROUND_FAILED,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        """Keep `awaitable` running as instance work; a refusing host is reported as `event`."""
        refusal = self.try_spawn(awaitable)
        if refusal is not None:
            report_failure(event, details or {}, refusal)

    def run_in_background(
        self, work: Awaitable[Any], event: str, details: Mapping[str, Any]
    ) -> None:
        """Run `work` detached; its failure (or the host's refusal) is reported as `event`."""

        async def guarded() -> None:
            try:
                await work
            except Exception as error:
                report_failure(event, details, error)

        task = asyncio.ensure_future(guarded())
        # Cancelled before it started (evicted, or refused by the host): close `work`
        # too, which was never awaited.
        task.add_done_callback(lambda _: close_unstarted(work))
        refusal = self._hand_over(task)
        if refusal is not None:
            report_failure(event, details, refusal)

    def emitter(self, hook: LifecycleHook | None) -> Emit:
        """Wrap a lifecycle hook: never raises, async hooks go to `wait_until`."""
        return create_emitter(hook, lambda awaitable: self.wait_until(awaitable))


def close_unstarted(work: Awaitable[Any]) -> None:
    """Close `work` if it is a coroutine that never started (its task was cancelled
    first), so it is not reported as never awaited."""
    if inspect.iscoroutine(work) and inspect.getcoroutinestate(work) == inspect.CORO_CREATED:
        work.close()
