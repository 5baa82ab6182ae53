"""What a Cloudflare-named storage method returns: an operation already done, its
outcome given when awaited.

On Cloudflare a storage operation starts when its method is called: a value put or an
alarm set without `await` is put or set all the same, and a read sees the writes called
before it. Under `workers-runtime-sdk` the method returns a coroutine, so one never
awaited gets Python's "coroutine ... was never awaited" warning, and one whose operation
failed also gets asyncio's "Future exception was never retrieved" log with the error
(workerd prints both); `started` gives the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

Started = Coroutine[Any, Any, T]
"""What a Cloudflare-named storage method returns: its outcome, to await."""


def started(run: Callable[[], T]) -> Started[T]:
    """`run()` done now, and its result (or its error) when awaited."""
    try:
        result = run()
    except Exception as error:
        return _failed(_outcome_of(error))

    async def done() -> T:
        return result

    return done()


def _outcome_of(error: Exception) -> asyncio.Future[Any] | Exception:
    """A failed future holding `error` (asyncio logs its error if it is never retrieved),
    or the error itself where no event loop runs."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return error
    outcome: asyncio.Future[Any] = loop.create_future()
    outcome.set_exception(error)
    return outcome


async def _failed(outcome: asyncio.Future[Any] | Exception) -> Any:
    if isinstance(outcome, Exception):
        raise outcome
    return await outcome
