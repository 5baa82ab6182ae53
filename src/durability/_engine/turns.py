"""Requests made in one turn of the event loop, handled together by one task.

Concurrent callers that add a request in the same turn join one group; a task started
for the group (it runs on the next turn) hands the whole group to `handle` and gives
each caller its own outcome. So the fixed cost of a transaction (its savepoint, the
alarm reconcile, one statement per table) is paid once per turn instead of once per
call: operations' registrations and the fanout's enqueues are written this way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from .._abandoned import abandoned_error

Request = TypeVar("Request")
Result = TypeVar("Result")

Spawn = Callable[[Awaitable[None]], "asyncio.Future[None]"]
Group = tuple[list[Request], list["asyncio.Future[Result]"], asyncio.AbstractEventLoop]
"""A turn's requests, their callers' futures in the same order, and the loop they run on."""
Then = Callable[[], object] | None
"""What runs once a group's callers have their outcomes (if anything)."""


class TurnBatch(Generic[Request, Result]):
    """Groups `add` calls per turn; `handle(requests)` returns one outcome per request
    (a result, or the exception that request raises) and what to run once the callers
    have them. The futures get their outcomes first, so each caller resumes (and its
    object's reply passes the output gate) before what follows the write, such as the
    handlers it claimed, writes anything the reply would have to wait for.

    If `handle` itself raises, every caller of the group gets that error; if its task
    is cancelled (or the host refuses it), every caller still waiting gets
    `abandoned_error` naming `noun`. A request whose caller gave up (its future is done)
    before its group starts is left out.
    """

    __slots__ = ("_group", "_handle", "_noun", "_spawn")

    def __init__(
        self,
        handle: Callable[[list[Request]], Awaitable[tuple[list[Result | Exception], Then]]],
        spawn: Spawn,
        noun: str,
    ) -> None:
        self._handle = handle
        self._spawn = spawn
        self._noun = noun
        self._group: Group[Request, Result] | None = None

    def add(self, request: Request) -> asyncio.Future[Result]:
        """The future outcome of `request`, handled together with this turn's others.

        Not a coroutine: a caller awaits the future itself, one coroutine fewer per
        request. Raises the host's refusal when the group's task cannot start."""
        group = self._group
        if group is None:
            # The loop looked up once per group, not per request (on Python 3.11 each
            # lookup is a `getpid` system call).
            group = ([], [], asyncio.get_running_loop())
            task = self._spawn(self._run(group))
            task.add_done_callback(lambda _: self._abandon(group))
            self._group = group
        future: asyncio.Future[Result] = group[2].create_future()
        group[0].append(request)
        group[1].append(future)
        return future

    async def _run(self, group: Group[Request, Result]) -> None:
        if self._group is group:
            self._group = None
        requests, futures, _ = group
        if any(map(_is_done, futures)):
            kept = [index for index, future in enumerate(futures) if not future.done()]
            requests[:] = [requests[index] for index in kept]
            futures[:] = [futures[index] for index in kept]
        if not futures:
            return
        then: Then = None
        try:
            outcomes, then = await self._handle(requests)
        except Exception as error:
            outcomes = [error] * len(futures)
        for future, outcome in zip(futures, outcomes, strict=True):
            if future.done():
                continue
            if isinstance(outcome, Exception):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
        futures.clear()  # every caller has its outcome: nothing for `_abandon` to fail
        if then is not None:
            then()

    def _abandon(self, group: Group[Request, Result]) -> None:
        """A group whose task ended without answering (it was cancelled): fail its callers
        with a definite error (see `abandoned_error`), and let the next request start a
        new group."""
        if self._group is group:
            self._group = None
        waiting = [future for future in group[1] if not future.done()]
        if not waiting:
            return
        error = abandoned_error(self._spawn, self._noun)
        for future in waiting:
            future.set_exception(error)


_is_done: Callable[[asyncio.Future[Any]], bool] = asyncio.Future.done
"""Whether a future is done (called from C by `map`)."""
