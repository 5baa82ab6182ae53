"""`AttemptRunner`: the one way an attempt is started, by every capability (a record of
operations or named alarms, a fanout target's batch, a workflow instance's run).

Whatever starts it (an alarm pass over due rows, a registration due now, the caller's
own insert that claims its new records), an attempt goes the same way: its key is
marked running and it takes a permit of the scheduler's FIFO pool (`Hold`); its claim
is written and committed before its handler is called; its outcome is written with a
generation-fenced statement; its permit and key are given back once that outcome is
persisted and its handler has ended (`batch`, `handler_task`, `settle`). The entry
points differ only in how permits are taken and who writes the claim:

- `run(rows, attempt_of)`: a pass; waits for permits in FIFO order, in batches of
  those free at a time, and returns once every attempt it started has settled;
- `run_alone(rows, attempt_of)`: a pass over suspects, each run holding every permit;
- `start(attempts)`: now, as far as permits are free (the rest is left to a pass, or
  held and run in turn as permits come free);
- `reserve(attempts)`: permits and keys taken before a write of the caller's own that
  inserts the records already claimed (`Reservation`), run once its commit is durable.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from collections.abc import Set as AbstractSet
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from .._clock import now_ms
from .._signal import AbortSignal
from .attempt import Attempt
from .batch import Hold, claim_and_run, release
from .permits import Release
from .running import ActiveExecution

if TYPE_CHECKING:
    from .engine import Engine

Row = TypeVar("Row")


class AttemptRunner:
    """Starts the attempts of every capability on one engine (`Engine.runner`)."""

    __slots__ = ("_engine",)

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

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
        for task in waiting:
            try:
                await task
            except Exception as error:
                failures.append(("", error))
        return failures

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
            for task in waiting:
                try:
                    await task
                except Exception as error:
                    failures.append((attempt.key, error))
        return failures

    def start(
        self, attempts: Sequence[Attempt], *, wait: bool = False, reconcile: bool = True
    ) -> Awaitable[None] | None:
        """Start now the `attempts` that free permits allow (keys already running here are
        left out); their keys are marked running before this returns. The others are
        left to a pass, or with `wait`, held too and each run once a permit comes free
        (FIFO). The awaitable runs them, then reconciles the alarm with what they left
        (unless `reconcile` is False: their executor reconciles as each one ends);
        `None` when nothing could start."""
        engine = self._engine
        running = engine.running
        permits: list[Release] = []
        chosen: list[Attempt] = []
        later: list[tuple[Attempt, ActiveExecution]] = []
        for attempt in attempts:
            table = attempt.kind.table.name
            if attempt.key in running.keys(table):
                continue
            permit = engine.permits.try_acquire()
            if permit is not None:
                permits.append(permit)
                chosen.append(attempt)
            elif wait:
                entry = running.start(table, attempt.key, attempt.generation, attempt.created_at)
                later.append((attempt, entry))
            else:
                break
        if not chosen and not later:
            return None
        waiting: list[asyncio.Task[None]] = []
        holds = self._hold(chosen, permits, waiting)
        run = partial(claim_and_run, engine, holds, waiting)
        return self._started(holds, waiting, run, later=later, reconcile=reconcile)

    def reserve(self, attempts: Iterable[tuple[int, Attempt]]) -> Reservation:
        """Take a free permit and the key of each attempt (new records due now, each given
        with its position in the caller's write) for a write that inserts them claimed;
        keys running here already, and repeats, are left out. See `Reservation`."""
        return Reservation(self, attempts)

    # -- internals ----------------------------------------------------------------------

    def _hold(
        self,
        attempts: Sequence[Attempt],
        permits: Sequence[Release],
        waiting: list[asyncio.Task[None]],
        alone: bool = False,
    ) -> list[Hold]:
        """Mark each attempt's key running with its permit (`alone`: the one attempt holds
        every permit; so does any attempt of a pool of one). An attempt that must wait
        for an older execution of its key gives its permit back and waits in a task
        added to `waiting`, then runs by itself (`_when_free`)."""
        engine = self._engine
        running = engine.running
        alone = alone or engine.permits.size == 1
        holds: list[Hold] = []
        for attempt, permit in zip(attempts, permits, strict=True):
            entry = running.start(
                attempt.kind.table.name, attempt.key, attempt.generation, attempt.created_at
            )
            if attempt.after is not None and not attempt.after.is_set():
                permit()
                waiting.append(engine.tasks.spawn(self._when_free(attempt, entry)))
                continue
            holds.append(Hold(attempt, entry, permit, alone))
        return holds

    async def _in_turn(
        self, later: list[tuple[Attempt, ActiveExecution]], waiting: list[asyncio.Task[None]]
    ) -> None:
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
                holds: list[Hold] = []
                for permit in permits:
                    attempt, entry = pending.popleft()
                    if attempt.after is not None and not attempt.after.is_set():
                        permit()
                        waiting.append(engine.tasks.spawn(self._when_free(attempt, entry)))
                    else:
                        holds.append(Hold(attempt, entry, permit, engine.permits.size == 1))
                try:
                    await self._run_held(holds, partial(claim_and_run, engine, holds, waiting))
                except Exception as error:
                    failures.append(error)
        finally:
            for attempt, entry in pending:
                engine.running.finish(attempt.kind.table.name, attempt.key, entry)
        if failures:
            raise failures[0]

    async def _when_free(self, attempt: Attempt, entry: ActiveExecution) -> None:
        """Run `attempt`, whose key is marked running already, once the older execution
        it waits for has settled and a permit is free; ends when it has settled."""
        engine = self._engine
        try:
            assert attempt.after is not None
            await attempt.after.wait()
            permit = engine.permits.try_acquire() or await engine.permits.acquire()
        except BaseException:
            engine.running.finish(attempt.kind.table.name, attempt.key, entry)
            raise
        holds = [Hold(attempt, entry, permit, engine.permits.size == 1)]
        waiting: list[asyncio.Task[None]] = []
        try:
            await self._run_held(holds, lambda: claim_and_run(engine, holds, waiting))
        finally:
            for task in waiting:
                await task

    async def _run_held(self, holds: list[Hold], run: Callable[[], Awaitable[None]]) -> None:
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
                    {"table": holds[0].attempt.kind.table.name},
                )

    async def _started(
        self,
        holds: list[Hold],
        waiting: list[asyncio.Task[None]],
        run: Callable[[], Awaitable[None]],
        *,
        later: list[tuple[Attempt, ActiveExecution]] | None = None,
        reconcile: bool = True,
    ) -> None:
        """`run()` over `holds` started outside a pass, then the attempts `later` (keys
        held, no permit yet) in turn; then wait for the attempts handed over and (with
        `reconcile`) reconcile the alarm with what they left."""
        try:
            try:
                await self._run_held(holds, run)
            finally:
                if later:
                    await self._in_turn(later, waiting)
        finally:
            for task in waiting:
                await task
        if reconcile:
            await self._engine.reconcile_now()


class Reservation:
    """The attempts of one write that start with it: held, claimed by the write, then run.

    Before the caller's transaction, each attempt due now takes a permit that is free
    right now (so it never goes ahead of a waiter: a released permit goes to the oldest
    waiter first) and marks its key running. The transaction inserts those records with
    their first attempt already claimed (`attempt = 1`, the row a claim would leave),
    so one commit makes a new record and its first claim durable together; their
    handlers run once that commit is durable, exactly as a batch runs the rows it
    claimed. A reservation whose record was not inserted gives its permit and key back.
    """

    __slots__ = ("_claimed", "_holds", "_positions", "_runner", "_started_at", "all_claimed")

    def __init__(self, runner: AttemptRunner, attempts: Iterable[tuple[int, Attempt]]) -> None:
        """An attempt must be of the first row of its key in the write: a later row of
        that key could not be inserted, so an earlier one keeps its place."""
        self._runner = runner
        self._holds: dict[str, Hold] = {}
        self._positions: set[int] = set()
        self._claimed: set[str] = set()
        """The keys the transaction inserted claimed."""
        self._started_at = 0
        self.all_claimed = False
        """Whether every record the transaction inserted was inserted claimed (none needs a
        timer)."""
        engine = runner._engine
        running = engine.running
        holds = self._holds
        name: str | None = None
        busy: Collection[str] = ()
        for position, attempt in attempts:
            table = attempt.kind.table.name
            if table != name:
                name = table
                busy = running.keys(name)
            # `busy` may predate the first key held here: those are in `holds`.
            if attempt.key in holds or attempt.key in busy or attempt.after is not None:
                continue
            permit = engine.permits.try_acquire()
            if permit is None:
                break
            entry = running.start(table, attempt.key, attempt.generation, attempt.created_at)
            holds[attempt.key] = Hold(attempt, entry, permit)
            self._positions.add(position)

    def __bool__(self) -> bool:
        return bool(self._holds)

    def __contains__(self, key: object) -> bool:
        return key in self._holds

    def first_attempts(self) -> AbstractSet[int]:
        """The positions, in the write's rows, of the records to insert claimed."""
        return self._positions

    def claimed(self, keys: Sequence[str], written: int) -> None:
        """In the transaction: records `keys` were inserted claimed, of `written` inserted
        in all (any other one needs the timer)."""
        self._started_at = now_ms()
        self._claimed = set(keys)
        self.all_claimed = len(keys) == written
        for key in keys:
            self._holds[key].entry.signal = AbortSignal()

    def start(self, *, reconcile: bool = True) -> Awaitable[None] | None:
        """After the commit is durable: the run of the claimed records (the awaitable),
        or `None` when there is none; every other hold is given back now. The run ends
        with a reconcile of the alarm, unless `reconcile` is False (their executor
        reconciles as each one ends)."""
        engine = self._runner._engine
        claimed = self._claimed
        holds: list[Hold] = []
        for key, hold in self._holds.items():
            if key in claimed:
                holds.append(hold)
            else:
                release(engine, hold)
        self._holds = {}
        if not holds:
            return None
        started_at = self._started_at
        waiting: list[asyncio.Task[None]] = []
        executor = holds[0].attempt.kind.executor
        return self._runner._started(
            holds,
            waiting,
            lambda: executor.run(engine, holds, started_at, waiting),
            reconcile=reconcile,
        )

    def release(self) -> None:
        """The write failed or was abandoned: give every permit and key back (a record it
        may have committed is left to the timer and the alarm)."""
        engine = self._runner._engine
        holds = list(self._holds.values())
        self._holds = {}
        for hold in holds:
            release(engine, hold)
        if holds and engine.options.live_timers:
            engine.refresh_in_background(
                "durability.scheduler.refresh_failed",
                {"table": holds[0].attempt.kind.table.name},
            )
