"""The error a caller gets when the task writing its request was cancelled under it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ._errors import DurabilityError

Spawn = Callable[[Awaitable[None]], object]


async def _nothing() -> None:
    """The work offered to the host to learn whether it still takes any."""


def abandoned_error(spawn: Spawn, what: str) -> Exception:
    """Why `what` was left unanswered: the host's refusal of new work when the instance
    is gone (its eviction error), else a `DurabilityError` saying the outcome is unknown.

    Callers get this instead of a `CancelledError` they did not ask for, which would
    look to `asyncio.timeout` or a `TaskGroup` like their own cancellation.
    """
    try:
        # A refusing host has wrapped the probe in a task and cancelled it: the task
        # ends the coroutine (closing it here would make the task's step fail).
        spawn(_nothing())
    except Exception as refusal:
        return refusal
    return DurabilityError(
        f"the {what} was abandoned before its write finished (its task was cancelled): "
        "whether it was stored is unknown; retry it with the same ids"
    )
