"""Attempts held together: one claim statement and one wait for its commit for the lot,
synchronous handlers called in place, their successes stored together.

Every held attempt owns its permit and its key lock (`Hold`) from before its claim until
its outcome is written and its handler has ended; the claims are committed
(`storage.sync()`) before any handler of the batch is called; every write is
generation-fenced. A handler that returns an awaitable goes on in a task of its own,
timed and cancellable (`handler_task`); one that returns at once needs no task and no
timer.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .._clock import now_ms
from .._context import SqlStorage
from .._signal import AbortSignal
from .attempt import Attempt, Done
from .handler_task import continue_in_task
from .lifecycle import AttemptStartedEvent, LifecycleEventType
from .permits import Release
from .running import ActiveExecution
from .settle import fail_exhausted, record_success, settle_error
from .tables import claim_attempt, claim_attempts, claim_suspect, is_exhausted
from .tasks import close_unstarted

if TYPE_CHECKING:
    from .engine import Engine

T = TypeVar("T")


class Hold:
    """One attempt's key lock and permit (every permit of the pool when it runs `alone`:
    nothing else of the scheduler then runs beside it), held until released."""

    __slots__ = ("alone", "attempt", "entry", "permit", "released")

    def __init__(
        self, attempt: Attempt, entry: ActiveExecution, permit: Release, alone: bool = False
    ) -> None:
        self.attempt = attempt
        self.entry = entry
        self.permit = permit
        self.alone = alone
        self.released = False


def release(engine: Engine, hold: Hold) -> None:
    """Give `hold`'s permit and key back."""
    hold.released = True
    hold.permit()
    attempt = hold.attempt
    engine.running.finish(attempt.kind.table.name, attempt.key, hold.entry)


async def claim_and_run(
    engine: Engine, holds: list[Hold], waiting: list[asyncio.Task[None]]
) -> None:
    """Claim the held attempts in one statement, wait for that commit, run the won ones;
    an attempt whose handler suspended goes on in a task added to `waiting`."""
    if not holds:
        return
    started_at = now_ms()
    errors: list[Exception] = []
    won = _claim(engine, holds, started_at, errors)
    claimed: list[Hold] = []
    for hold in holds:
        attempt = hold.attempt
        if attempt.key in won:
            hold.entry.signal = AbortSignal()
            claimed.append(hold)
            continue
        kind = attempt.kind
        if not errors and is_exhausted(
            engine.sql, kind.table, attempt.key, attempt.generation, kind.policy.max_attempts
        ):
            await fail_exhausted(engine, attempt)
        release(engine, hold)
    if not claimed:
        if errors:
            raise errors[0]
        return
    # Every claim is durable before any handler of the batch starts.
    await engine.storage.sync()
    await run_claimed(engine, claimed, started_at, waiting)
    if errors:
        raise errors[0]


async def run_claimed(
    engine: Engine, claimed: list[Hold], started_at: int, waiting: list[asyncio.Task[None]]
) -> None:
    """Run the handlers of `claimed` attempts, whose claims (at `started_at`) are durable
    already, and settle them; an attempt whose handler suspended goes on in `waiting`."""
    succeeded: list[tuple[Hold, Any]] = []
    failed: list[tuple[Hold, BaseException]] = []
    for hold in claimed:
        attempt, signal = hold.attempt, hold.entry.signal
        assert signal is not None
        kind = attempt.kind
        number = attempt.number
        if LifecycleEventType.ATTEMPT_STARTED in kind.listened:
            kind.emit(AttemptStartedEvent(**attempt.entity(), timestamp=started_at, attempt=number))
        if signal.reason is not None:
            failed.append((hold, signal.reason))  # cancelled or purged since its claim
            continue
        try:
            value = kind.executor.invoke(attempt, number, signal)
        except (Exception, asyncio.CancelledError) as error:
            failed.append((hold, error))
            continue
        if value is not None and inspect.isawaitable(value):
            _hand_over(engine, hold, number, started_at, value, waiting)
            continue
        succeeded.append((hold, value))
    _store_successes(engine, succeeded, started_at, failed)
    for hold, failure in failed:
        await settle_error(engine, hold.attempt, hold.attempt.number, started_at, failure)
        release(engine, hold)


def _claim(engine: Engine, holds: list[Hold], now: int, errors: list[Exception]) -> set[str]:
    """The keys of `holds` whose claim won, in one statement; when that statement fails,
    claimed one by one, so a row the storage refuses fails alone (into `errors`). A
    suspect (held alone, by itself) is claimed as one (`claim_suspect`)."""
    first = holds[0].attempt
    if first.suspect is not None:
        return _claim_suspect(engine, first, now, errors)
    alone = holds[0].alone
    rows = [
        (hold.attempt.key, hold.attempt.generation, hold.attempt.attempt)
        for hold in holds
        if hold.attempt.counted <= hold.attempt.kind.policy.max_attempts
    ]
    if not rows:
        return set()
    table = holds[0].attempt.kind.table
    try:
        return at_once(engine, len(rows), lambda sql: claim_attempts(sql, table, rows, now, alone))
    except Exception:
        pass
    won: set[str] = set()
    for key, generation, seen in rows:
        try:
            if claim_attempt(engine.sql, table, key, generation, seen, now, alone) is not None:
                won.add(key)
        except Exception as error:
            errors.append(error)
    return won


def _claim_suspect(engine: Engine, attempt: Attempt, now: int, errors: list[Exception]) -> set[str]:
    """The key of suspect `attempt` if its claim won (none when it is out of attempts)."""
    if attempt.counted > attempt.kind.policy.max_attempts:
        return set()
    try:
        claimed = claim_suspect(
            engine.sql, attempt.kind.table, attempt.key, attempt.generation, attempt.attempt, now
        )
    except Exception as error:
        errors.append(error)
        return set()
    if claimed is None:
        return set()
    attempt.interruptions += 1
    return {attempt.key}


_ONE_STATEMENT = 16
"""Rows a set-based claim surely writes in one statement (more may take several, and a
statement that fails undoes only itself)."""


def at_once(engine: Engine, count: int, write: Callable[[SqlStorage], T]) -> T:
    """`write` of `count` rows, undone as a whole if it raises (a savepoint when it may
    run several statements), so the row-by-row retry starts from nothing written."""
    if count <= _ONE_STATEMENT:
        return write(engine.sql)
    return engine.transaction_sync(write)


def _hand_over(
    engine: Engine,
    hold: Hold,
    number: int,
    started_at: int,
    called: Any,
    waiting: list[asyncio.Task[None]],
) -> None:
    """Let the attempt's own task await what its handler returned (and release it)."""
    try:
        task = engine.tasks.spawn(
            continue_in_task(
                engine, hold.attempt, hold.entry, hold.permit, number, started_at, called
            )
        )
    except BaseException:
        if inspect.iscoroutine(called):
            called.close()
        raise
    task.add_done_callback(lambda _: close_unstarted(called))
    hold.released = True  # the attempt's task owns the permit and the key lock now
    waiting.append(task)


def _store_successes(
    engine: Engine,
    succeeded: list[tuple[Hold, Any]],
    started_at: int,
    failed: list[tuple[Hold, BaseException]],
) -> None:
    """Write every success (set-based, in one savepoint), then release each attempt; a
    success that cannot be stored joins `failed`."""
    if not succeeded:
        return
    done: list[Done] = [(hold.attempt, hold.attempt.number, value) for hold, value in succeeded]
    executor = done[0][0].kind.executor
    stored: list[int | Exception | None] | None
    try:
        # A savepoint: a completion may read after its write (a count), and a read
        # failing there must undo the write before the one-by-one retry.
        stored = engine.transaction_sync(lambda sql: executor.complete(sql, done))
    except Exception:
        stored = None  # one row spoilt the statement: store them one by one
    if stored is None:
        stored = [_complete_one(engine, one) for one in done]
    for (hold, value), outcome in zip(succeeded, stored, strict=True):
        if isinstance(outcome, Exception):
            failed.append((hold, outcome))
            continue
        attempt = hold.attempt
        record_success(engine, attempt, attempt.number, started_at, outcome, value)
        release(engine, hold)


def _complete_one(engine: Engine, done: Done) -> int | Exception | None:
    try:
        return done[0].kind.executor.complete(engine.sql, [done])[0]
    except Exception as error:
        return error
