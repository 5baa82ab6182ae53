"""`RecordExecutor`: how an attempt of a record runs (operations, named alarms).

A record is one row of a table with `status`, `attempt`, `next_attempt_at`,
`generation_id`, `claim_alone`, `interruptions` and `spared` columns. Its claim counts
one more attempt with a generation-fenced statement (set-based for a batch; a suspect
claimed alone, see `tables.claim_suspect`); the handler is called once the claim is
durable: one that returns at once needs no task and no timer, and the successes of a
batch are stored together; one that returns an awaitable goes on in a task of its own,
timed and cancellable (`handler_task`). A subclass says how the handler is called and
how a success is stored.
"""

from __future__ import annotations

import asyncio
import inspect
import operator
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from .._clock import now_ms
from .._context import SqlStorage
from .._signal import AbortSignal
from .attempt import Attempt, AttemptKind, Done
from .batch import at_once, release, release_all
from .handler_task import continue_in_task
from .lifecycle import AttemptStartedEvent, LifecycleEventType
from .permits import no_permit
from .policy import AttemptPolicy
from .settle import fail_exhausted, record_successes, settle_error
from .tables import claim_attempt, claim_attempts, claim_suspect, is_exhausted
from .tasks import close_unstarted

if TYPE_CHECKING:
    from .engine import Engine


class RecordExecutor(ABC):
    """Claims, runs and settles attempts of one helper's records."""

    __slots__ = ()

    @abstractmethod
    def invoke(self, attempt: Attempt, number: int, signal: AbortSignal) -> Any:
        """Call the handler for attempt `number` of the record (the result may be
        awaitable)."""

    def invoker(self, kind: AttemptKind) -> Callable[[Attempt, int, AbortSignal], Any]:
        """`invoke` for a run of attempts of `kind`, which may look up once what every
        one of them shares."""
        return self.invoke

    @abstractmethod
    def complete(self, engine: Engine, done: Sequence[Done]) -> list[int | Exception | None]:
        """Store the successes `done` of this executor's records, each fenced on its
        generation and attempt: per row its completion time, `None` when a newer
        generation won, or the error that turns the success into a failure. May write
        several rows per statement; a raise fails every row (they are then stored one
        by one), so one that raises must leave nothing written (a savepoint, when it
        runs more than one statement that writes)."""

    @abstractmethod
    def on_terminal(self, sql: SqlStorage, attempt: Attempt) -> None:
        """Write what else a terminal failure of `attempt` changes, in its transaction (a
        recurrence moves on to its next slot)."""

    @abstractmethod
    def is_terminal(self, error: BaseException, policy: AttemptPolicy) -> bool:
        """Whether `error` ends the record at once, whatever attempts are left (a rule of
        the capability's own, beside the engine's non-retryable rules)."""

    async def claim(
        self, engine: Engine, holds: list[Attempt], now: int, errors: list[Exception]
    ) -> set[str]:
        """The keys of `holds` whose claim won (see `_claim`)."""
        return _claim(engine, holds, now, errors)

    async def lost(self, engine: Engine, attempt: Attempt) -> None:
        """A claim that lost: fail the record if it is at its attempt limit."""
        kind = attempt.kind
        if is_exhausted(
            engine.sql, kind.table, attempt.key, attempt.generation, kind.policy.max_attempts
        ):
            await fail_exhausted(engine, attempt)

    async def run(
        self,
        engine: Engine,
        claimed: list[Attempt],
        started_at: int,
        waiting: list[asyncio.Task[None]],
        refill: Refill | None = None,
    ) -> None:
        """Run the handlers of `claimed` attempts, whose claims (at `started_at`) are
        durable already, and settle them; one whose handler suspended goes on in a task
        added to `waiting`. With `refill`, a handler that returned without awaiting hands
        its permit to the next claimed attempt `refill` gives, up to `RUN_ROWS` in all
        and within `RUN_SLICE_MS`: it has ended, and its outcome is written with theirs
        before anything else of the object runs, so no two handlers ever hold one permit
        at once."""
        await run_claimed(engine, claimed, started_at, waiting, refill)


Refill = Callable[[int], list[Attempt]]
"""Up to that many more claimed attempts, to run on the permits of ones that have ended
(fewer, or none, when fewer wait)."""

RUN_ROWS = 128
"""Handlers that return without awaiting one batch runs back to back at most, on
permits handed on (their successes are then written together)."""
RUN_SLICE_MS = 5
"""How long, by the runtime's clock, a batch goes on handing permits on: slow handlers
stop it early, so neither the loop nor their written successes wait for 128 of them.
The clock is read once per round of handed-on permits."""


async def run_claimed(
    engine: Engine,
    claimed: list[Attempt],
    started_at: int,
    waiting: list[asyncio.Task[None]],
    refill: Refill | None = None,
) -> None:
    """Run the handlers of `claimed` attempts, whose claims (at `started_at`) are durable
    already, and settle them; an attempt whose handler suspended goes on in `waiting`
    (`refill`: see `RecordExecutor.run`)."""
    done: list[Done] = []
    failed: list[tuple[Attempt, BaseException]] = []
    last_kind = None
    announce = False
    invoke: Callable[[Attempt, int, AbortSignal], Any]  # set by the first attempt
    batch = claimed
    ran = len(batch)
    if refill is not None:
        slice_ends = now_ms() + RUN_SLICE_MS
    while True:
        ended = len(done)
        for attempt in batch:
            signal: AbortSignal = attempt.signal  # type: ignore[assignment]  # claimed
            kind = attempt.kind
            if kind is not last_kind:  # what a kind decides, looked up once per run of it
                last_kind = kind
                announce = LifecycleEventType.ATTEMPT_STARTED in kind.listened
                executor: RecordExecutor = kind.executor  # type: ignore[assignment]
                invoke = executor.invoker(kind)
            number = attempt.attempt + 1
            if announce:
                kind.emit(
                    AttemptStartedEvent(**attempt.entity(), timestamp=started_at, attempt=number)
                )
            reason = signal._reason  # the `reason` property, read once per attempt
            if reason is not None:
                failed.append((attempt, reason))  # cancelled or purged since its claim
                continue
            try:
                value = invoke(attempt, number, signal)
            except (Exception, asyncio.CancelledError) as error:
                failed.append((attempt, error))
                continue
            if value is not None and inspect.isawaitable(value):
                _hand_over(engine, attempt, number, started_at, value, waiting)
                continue
            done.append((attempt, number, value))
        if refill is None:
            break
        # The handlers of this round that returned without awaiting hand their permits
        # on, one each, to as many more claimed attempts.
        if ran >= RUN_ROWS or len(done) == ended or now_ms() >= slice_ends:
            break
        batch = refill(min(len(done) - ended, RUN_ROWS - ran))
        if not batch:
            break
        ran += len(batch)
        for (ended_attempt, _, _), more in zip(done[ended:], batch, strict=False):
            more.permit, ended_attempt.permit = ended_attempt.permit, no_permit
    if done:
        _store_successes(engine, done, started_at, failed)
    for hold, failure in failed:
        await settle_error(engine, hold, hold.attempt + 1, started_at, failure)
        release(engine, hold)


def _claim(engine: Engine, holds: list[Attempt], now: int, errors: list[Exception]) -> set[str]:
    """The keys of `holds` whose claim won, in one statement; when that statement fails,
    claimed one by one, so a row the storage refuses fails alone (into `errors`). A
    suspect (held alone, by itself) is claimed as one (`claim_suspect`)."""
    first = holds[0]
    if first.suspect is not None:
        return _claim_suspect(engine, first, now, errors)
    alone = holds[0].alone
    rows = [
        (hold.key, hold.generation, hold.attempt)
        for hold in holds
        if hold.attempt - hold.spared < hold.kind.policy.max_attempts
    ]
    if not rows:
        return set()
    table = holds[0].kind.table
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


def _hand_over(
    engine: Engine,
    hold: Attempt,
    number: int,
    started_at: int,
    called: Any,
    waiting: list[asyncio.Task[None]],
) -> None:
    """Let the attempt's own task await what its handler returned (and release it)."""
    try:
        task = engine.tasks.spawn(continue_in_task(engine, hold, number, started_at, called))
    except BaseException:
        if inspect.iscoroutine(called):
            called.close()
        raise
    task.add_done_callback(lambda _: close_unstarted(called))
    hold.released = True  # the attempt's task owns the permit and the key lock now
    waiting.append(task)


def _store_successes(
    engine: Engine,
    done: list[Done],
    started_at: int,
    failed: list[tuple[Attempt, BaseException]],
) -> None:
    """Write every success of `done` (in order; set-based), then release each attempt;
    a success that cannot be stored joins `failed`."""
    executor: RecordExecutor = done[0][0].kind.executor  # type: ignore[assignment]
    try:
        stored = executor.complete(engine, done)
    except Exception:
        # One row spoilt the statement (which wrote nothing): store them one by one.
        stored = [_complete_one(engine, one) for one in done]
    if not set(map(type, stored)) <= _WRITTEN:
        kept: list[int] = []
        for index, ((attempt, _, _), outcome) in enumerate(zip(done, stored, strict=True)):
            if isinstance(outcome, Exception):
                failed.append((attempt, outcome))
            else:
                kept.append(index)
        done = [done[index] for index in kept]
        stored = [stored[index] for index in kept]
    record_successes(engine, done, cast("list[int | None]", stored), started_at)
    release_all(engine, list(map(_ATTEMPT, done)))


_ATTEMPT: Callable[[Done], Attempt] = operator.itemgetter(0)
"""The attempt of a success."""
_WRITTEN = frozenset({int, type(None)})
"""The types of a stored success's outcome (its `completed_at`, or `None`)."""


def _complete_one(engine: Engine, done: Done) -> int | Exception | None:
    try:
        executor: RecordExecutor = done[0].kind.executor  # type: ignore[assignment]
        return executor.complete(engine, [done])[0]
    except Exception as error:
        return error
