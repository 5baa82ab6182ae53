"""`AttemptRunner`: the one way an attempt is started, by every capability (a record of
operations or named alarms, a fanout target's batch, a workflow instance's run).

Whatever starts it (an alarm pass over due rows, a registration due now, the caller's
own insert that claims its new records), an attempt goes the same way: its key is
marked running and it takes a permit of the scheduler's FIFO pool (`take_hold`); its claim
is written and committed before its handler is called; its outcome is written with a
generation-fenced statement; its permit and key are given back once that outcome is
persisted and its handler has ended (`batch`, `handler_task`, `settle`). The entry
points differ only in how permits are taken and who writes the claim:

- `run(rows, attempt_of)`: a pass; waits for permits in FIFO order, in batches of
  those free at a time, and returns once every attempt it started has settled;
- `run_alone(rows, attempt_of)`: a pass over suspects, each run holding every permit;
- `start(attempts)`: now, as far as permits are free (the rest is left to a pass, or
  held and run in turn as permits come free);
- `reserve(attempts, positions)`: keys (and the permits free) taken before a write of the caller's
  own that inserts the records already claimed (`Reservation`, in `reservation`), run
  once its commit is durable: at once with a permit, else as permits come (the
  engine's `ClaimQueue`, for callers that queue).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from .attempt import Attempt
from .batch import claim_and_run, release, take_hold
from .permits import Release
from .reservation import ClaimQueue, Reservation

if TYPE_CHECKING:
    from .engine import Engine

Row = TypeVar("Row")


class AttemptRunner:
    """Starts the attempts of every capability on one engine (`Engine.runner`)."""

    __slots__ = ("_engine", "queue")

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self.queue = ClaimQueue(self)
        """Attempts claimed by their records' inserts, waiting for permits."""

    async def run(
        self,
        rows: Iterable[Row],
        attempt_of: Callable[[Row], Attempt | None],
        *,
        table: str,
    ) -> list[tuple[str, Exception]]:
        """Run one attempt of each row, in order, in batches of the permits free at the time.

        `attempt_of(row)` is the row's attempt, or `None` to skip it (it is running here
        already); it is asked when the row is taken. Until the last row is taken, the
        early timer leaves `table` to this run (`Engine.pulling`). Returns once every
        attempt started here has settled: the storage failures met, by key (handler
        errors are settled into their rows).
        """
        engine = self._engine
        pending = deque(rows)
        if not pending:
            return []
        failures: list[tuple[str, Exception]] = []
        waiting: list[asyncio.Task[None]] = []
        taken_all = engine.pulling(table)
        try:
            while pending:
                permits = await engine.permits.take(len(pending))
                attempts: list[Attempt] = []
                while pending and len(attempts) < len(permits):
                    attempt = attempt_of(pending.popleft())
                    if attempt is not None:
                        attempts.append(attempt)
                if not pending:
                    taken_all()
                # Rows found running here by now take no permit: give theirs back.
                for spare in permits[len(attempts) :]:
                    spare()
                if not attempts:
                    continue
                holds = self._hold(attempts, permits[: len(attempts)], waiting)
                try:
                    await self._run_held(holds, partial(claim_and_run, engine, holds, waiting))
                except Exception as error:
                    failures.append((attempts[0].key, error))
        finally:
            taken_all()
        return failures + await _settled(waiting, "")

    async def run_alone(
        self,
        rows: Iterable[Row],
        attempt_of: Callable[[Row], Attempt | None],
        *,
        table: str,
    ) -> list[tuple[str, Exception]]:
        """Run one attempt of each row (suspects: rows whose last attempt never settled),
        one at a time, each alone: holding every permit of the pool, so nothing else of
        the scheduler runs beside it. Returns, like `run`, the storage failures met."""
        engine = self._engine
        failures: list[tuple[str, Exception]] = []
        for row in rows:
            permit = await engine.permits.take_all()
            attempt = attempt_of(row)
            if attempt is None:
                permit()
                continue
            waiting: list[asyncio.Task[None]] = []
            holds = self._hold([attempt], [permit], waiting, alone=True)
            try:
                await self._run_held(holds, partial(claim_and_run, engine, holds, waiting))
            except Exception as error:
                failures.append((attempt.key, error))
            failures += await _settled(waiting, attempt.key)
        return failures

    def start(
        self, attempts: Sequence[Attempt], *, wait: bool = False, reconcile: bool = True
    ) -> Awaitable[None] | None:
        """Start now the `attempts` that free permits allow (keys already running here are
        left out); their keys are marked running before this returns. The others are
        left to a pass, or with `wait`, held too and each run once a permit comes free
        (FIFO). While claims are queued for permits (`ClaimQueue`) none is free to take:
        they go first. The awaitable runs them, then reconciles the alarm with what they
        left (unless `reconcile` is False: their executor reconciles as each one ends);
        `None` when nothing could start."""
        engine = self._engine
        behind = self.queue.reserved > 0
        if behind and not wait:
            return None
        running = engine.running
        permits: list[Release] = []
        chosen: list[Attempt] = []
        later: list[Attempt] = []
        for attempt in attempts:
            table = attempt.kind.table.name
            if attempt.key in running.keys(table):
                continue
            permit = None if behind else engine.permits.try_acquire()
            if permit is not None:
                permits.append(permit)
                chosen.append(attempt)
            elif wait:
                later.append(take_hold(engine, attempt))
            else:
                break
        if not chosen and not later:
            return None
        waiting: list[asyncio.Task[None]] = []
        holds = self._hold(chosen, permits, waiting)
        run = partial(claim_and_run, engine, holds, waiting)
        return self._started(holds, waiting, run, later=later, reconcile=reconcile)

    def reserve(
        self, attempts: Sequence[Attempt], positions: Sequence[int], *, queue: bool = True
    ) -> Reservation:
        """Take the key of each attempt (new records due now; `positions` gives each one's
        position in the caller's write), and a permit if one is free, for a write that inserts them
        claimed; keys running here already, and repeats, are left out. Without `queue`,
        the attempts past the free permits are left out too. See `Reservation`."""
        return Reservation(self, attempts, positions, queue=queue)

    # -- internals ----------------------------------------------------------------------

    def _hold(
        self,
        attempts: Sequence[Attempt],
        permits: Sequence[Release],
        waiting: list[asyncio.Task[None]],
        alone: bool = False,
    ) -> list[Attempt]:
        """Mark each attempt's key running with its permit (`alone`: the one attempt holds
        every permit; so does any attempt of a pool of one). An attempt that must wait
        for an older execution of its key gives its permit back and waits in a task
        added to `waiting`, then runs by itself (`_when_free`)."""
        engine = self._engine
        alone = alone or engine.permits.size == 1
        holds: list[Attempt] = []
        for attempt, permit in zip(attempts, permits, strict=True):
            if attempt.after is not None and not attempt.after.is_set():
                held = take_hold(engine, attempt)
                permit()
                waiting.append(engine.tasks.spawn(self._when_free(held)))
                continue
            holds.append(take_hold(engine, attempt, permit, alone))
        return holds

    async def _in_turn(self, later: list[Attempt], waiting: list[asyncio.Task[None]]) -> None:
        """Run `later`'s attempts, whose keys are marked running already, in their order
        as permits come free (FIFO, in batches of those free at a time; one that waits
        for an older execution of its key does so in `_when_free`). Raises the first
        storage failure once every one was tried."""
        engine = self._engine
        pending = deque(later)
        failures: list[Exception] = []
        try:
            while pending:
                permits = await engine.permits.take(len(pending))
                holds: list[Attempt] = []
                for permit in permits:
                    held = pending.popleft()
                    after = held.after
                    if after is not None and not after.is_set():
                        permit()
                        waiting.append(engine.tasks.spawn(self._when_free(held)))
                    else:
                        held.permit, held.alone = permit, engine.permits.size == 1
                        holds.append(held)
                try:
                    await self._run_held(holds, partial(claim_and_run, engine, holds, waiting))
                except Exception as error:
                    failures.append(error)
        finally:
            for held in pending:
                engine.running.finish(held.kind.table.name, held.key, held)
        if failures:
            raise failures[0]

    async def _when_free(self, held: Attempt) -> None:
        """Run `held`'s attempt, whose key is marked running already, once the older
        execution it waits for has settled and a permit is free; ends when it has
        settled."""
        engine = self._engine
        try:
            assert held.after is not None
            await held.after.wait()
            permit = engine.permits.try_acquire() or await engine.permits.acquire()
        except BaseException:
            engine.running.finish(held.kind.table.name, held.key, held)
            raise
        held.permit, held.alone = permit, engine.permits.size == 1
        holds = [held]
        waiting: list[asyncio.Task[None]] = []
        try:
            await self._run_held(holds, lambda: claim_and_run(engine, holds, waiting))
        finally:
            for task in waiting:
                await task

    async def _run_held(self, holds: list[Attempt], run: Callable[[], Awaitable[None]]) -> None:
        """`run()` over `holds`; release every one not handed over, whatever happens."""
        try:
            await run()
        finally:
            for hold in holds:
                if not hold.released:
                    release(self._engine, hold)
            if holds and self._engine.options.live_timers:
                # The keys are eligible for the timer again: re-arm it for work it skipped.
                self._engine.refresh_in_background(
                    "durability.scheduler.refresh_failed",
                    {"table": holds[0].kind.table.name},
                )

    async def _started(
        self,
        holds: list[Attempt],
        waiting: list[asyncio.Task[None]],
        run: Callable[[], Awaitable[None]],
        *,
        later: list[Attempt] | None = None,
        reconcile: bool = True,
    ) -> None:
        """`run()` over `holds` started outside a pass, then the attempts `later` (keys
        held, no permit yet) in turn; then wait for the attempts handed over and (with
        `reconcile`) reconcile the alarm with what they left, unless claims are queued for
        permits: the queue reconciles once it has run them, with fewer keys running for
        the reconcile to look past."""
        try:
            try:
                await self._run_held(holds, run)
            finally:
                if later:
                    await self._in_turn(later, waiting)
        finally:
            for task in waiting:
                await task
        if reconcile and not self.queue.reserved:
            await self._engine.reconcile_now()


async def _settled(waiting: list[asyncio.Task[None]], key: str) -> list[tuple[str, Exception]]:
    """Wait for every task of `waiting`; the storage failures they raised, under `key`."""
    failures: list[tuple[str, Exception]] = []
    for task in waiting:
        try:
            await task
        except Exception as error:
            failures.append((key, error))
    return failures
