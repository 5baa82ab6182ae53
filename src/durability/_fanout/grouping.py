"""Requests made in one turn of the event loop, handled together by one task.

Concurrent callers that submit in the same turn join one group; a task started for the
group (it runs on the next turn) hands the whole group to `handle` and gives each caller
its own outcome. So the fixed cost of a transaction (its savepoint, the alarm reconcile,
one statement per table) is paid once per turn instead of once per call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

Request = TypeVar("Request")
Result = TypeVar("Result")

Spawn = Callable[[Awaitable[None]], "asyncio.Future[None]"]


class TurnGroups(Generic[Request, Result]):
    """Groups `submit` calls per turn; `handle(requests)` returns one outcome per request
    (a result, or the exception that request raises). If `handle` itself raises, every
    caller of the group gets that error. A request whose caller is cancelled before its
    group starts is left out."""

    __slots__ = ("_group", "_handle", "_spawn")

    def __init__(
        self,
        handle: Callable[[list[Request]], Awaitable[list[Result | Exception]]],
        spawn: Spawn,
    ) -> None:
        self._handle = handle
        self._spawn = spawn
        self._group: list[tuple[Request, asyncio.Future[Result]]] | None = None

    async def submit(self, request: Request) -> Result:
        """The outcome of `request`, handled together with this turn's other requests."""
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        group = self._group
        if group is None:
            group = []
            task = self._spawn(self._run(group))
            task.add_done_callback(lambda _: self._abandon(group))
            self._group = group
        group.append((request, future))
        return await future

    async def _run(self, group: list[tuple[Request, asyncio.Future[Result]]]) -> None:
        if self._group is group:
            self._group = None
        # A caller cancelled before its group started gets nothing done for it.
        group[:] = [(request, future) for request, future in group if not future.done()]
        if not group:
            return
        try:
            outcomes = await self._handle([request for request, _ in group])
        except Exception as error:
            outcomes = [error] * len(group)
        for (_, future), outcome in zip(group, outcomes, strict=True):
            if future.done():
                continue
            if isinstance(outcome, Exception):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

    def _abandon(self, group: list[tuple[Request, asyncio.Future[Result]]]) -> None:
        """A group whose task ended without answering (it was cancelled): cancel its
        callers, and let the next request start a new group."""
        if self._group is group:
            self._group = None
        for _, future in group:
            if not future.done():
                future.cancel()
