"""Attempts held together: one claim for the lot, one wait for its commit, then their
run, by the executor of their kind.

Every held attempt owns its permit and its key lock (`take_hold`) from before its claim
until its outcome is written and its work has ended; the claims are committed
(`storage.sync()`) before any of the batch runs. What a claim writes, what happens to
an attempt whose claim lost, and how the claimed ones run is the executor's
(`Executor`: `RecordExecutor` for record tables, the fanout's for deliveries).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .._clock import now_ms
from .._context import SqlStorage
from .._signal import AbortSignal
from .attempt import Attempt
from .permits import Release, no_permit
from .tasks import close_unstarted

if TYPE_CHECKING:
    from .engine import Engine

T = TypeVar("T")


def take_hold(
    engine: Engine, attempt: Attempt, permit: Release = no_permit, alone: bool = False
) -> Attempt:
    """Hold `attempt` with `permit` (every permit of the pool when it runs `alone`):
    mark its key running (replacing any entry of a purged record)."""
    attempt.permit = permit
    attempt.alone = alone
    attempt.released = False
    engine.running.table(attempt.kind.table.name)[attempt.key] = attempt
    return attempt


def release(engine: Engine, hold: Attempt) -> None:
    """Give the permit and key `hold` holds back."""
    hold.released = True
    hold.permit()
    engine.running.finish(hold.kind.table.name, hold.key, hold)


def release_all(engine: Engine, holds: list[Attempt]) -> None:
    """`release` each of `holds` (of one table), in order."""
    if not holds:
        return
    running = engine.running.table(holds[0].kind.table.name)
    for hold in holds:
        hold.released = True
        permit = hold.permit
        if permit is not no_permit:  # one a batch handed on (see `records.run_claimed`)
            permit()
        hold.settle()
        key = hold.key
        if running.get(key) is hold:
            del running[key]


async def claim_and_run(
    engine: Engine, holds: list[Attempt], waiting: list[asyncio.Task[None]]
) -> None:
    """Claim the held attempts (one write for the lot), wait for that commit, run the won
    ones; an attempt that goes on in a task of its own is added to `waiting`. Raises only
    for storage failures (after running what could run)."""
    if not holds:
        return
    executor = holds[0].kind.executor
    started_at = now_ms()
    errors: list[Exception] = []
    won = await executor.claim(engine, holds, started_at, errors)
    claimed: list[Attempt] = []
    for hold in holds:
        if hold.key in won:
            hold.signal = AbortSignal()
            claimed.append(hold)
            continue
        if not errors:
            await executor.lost(engine, hold)
        release(engine, hold)
    if not claimed:
        if errors:
            raise errors[0]
        return
    # Every claim is durable before anything of the batch runs.
    await engine.storage.sync()
    await executor.run(engine, claimed, started_at, waiting)
    if errors:
        raise errors[0]


_ONE_STATEMENT = 16
"""Rows a set-based claim surely writes in one statement (more may take several, and a
statement that fails undoes only itself)."""


def at_once(engine: Engine, count: int, write: Callable[[SqlStorage], T]) -> T:
    """`write` of `count` rows, undone as a whole if it raises (a savepoint when it may
    run several statements), so the row-by-row retry starts from nothing written."""
    if count <= _ONE_STATEMENT:
        return write(engine.sql)
    return engine.transaction_sync(write)


def hand_over(
    engine: Engine,
    hold: Attempt,
    work: Awaitable[Any],
    waiting: list[asyncio.Task[None]],
    finish: Callable[[Engine, Attempt], None] = release,
) -> None:
    """Let a task of the instance own `hold` and run `work` (added to `waiting`); the
    task gives the hold back (`finish`, by default `release`) when `work` ends."""

    async def run() -> None:
        try:
            await work
        finally:
            finish(engine, hold)

    try:
        task = engine.tasks.spawn(run())
    except BaseException:
        if inspect.iscoroutine(work):
            work.close()
        raise
    task.add_done_callback(lambda _: close_unstarted(work))
    hold.released = True  # the task owns the permit and the key lock now
    waiting.append(task)
