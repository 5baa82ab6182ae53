"""`Reservation`: the attempts a caller's own write inserts already claimed, then runs.

A registration batch inserts its new records due now with their first attempt claimed
(`attempt = 1`, the row a claim would leave), so one commit makes the records and their
claims durable together, however many there are. Those that found a permit free run
right after that commit (`claim_alone` 0, or 1 in a pool of one, as any claim); the
others join the engine's `ClaimQueue` and start as permits come, in the order they were
claimed, with no further claim and no further commit (`claim_alone` 2: claimed ahead of
its permit). When nothing else is queued, the queue runs the first ones too, in the
batch that hands their permits on to the others (their successes written together).

After a crash or an eviction such a row was claimed but never settled, and nothing tells
whether its handler had started: it is claimed again with the others of a pass, not
alone, and its lost attempt is spared (see `tables.claim_attempts`). A poison queued
this way so costs one more interrupted run, beside others, before it runs alone.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Collection, Sequence
from typing import TYPE_CHECKING

from .._clock import now_ms
from .._signal import AbortSignal
from .attempt import Attempt, AttemptKind
from .batch import release
from .lifecycle import report_failure
from .permits import no_permit
from .records import RecordExecutor
from .running import ActiveExecution
from .tasks import BACKGROUND_FAILED

if TYPE_CHECKING:
    from .runner import AttemptRunner

QUEUED_CLAIM = 2
"""`claim_alone` of an attempt claimed by its record's insert ahead of its permit."""

MAX_QUEUED = 1_000
"""Claims one engine holds ahead of their permits at most; the records past it are
inserted unclaimed, for the timer and the alarm (every queued key is marked running,
and the reconcile reads as many pending rows as there are running keys)."""


class ClaimQueue:
    """Claimed attempts waiting for permits, started in the order they were claimed.

    `reserved` counts the queued claims of every reservation, from before its write
    until each one has its permit: while it is not zero, a new reservation takes no
    free permit (that would go ahead of them). One task at a time takes permits for
    the head of the queue, in the pool's FIFO order with every other waiter, and runs
    each batch it gets.
    """

    __slots__ = ("_draining", "_holds", "_runner", "reserved")

    def __init__(self, runner: AttemptRunner) -> None:
        self._runner = runner
        self._holds: deque[Attempt] = deque()
        self._draining = False
        self.reserved = 0

    def add(self, holds: Sequence[Attempt]) -> None:
        """Queue `holds` (claimed, durable, without a permit) behind the others."""
        self._holds.extend(holds)
        if not self._draining:
            self._start_draining([])

    def add_behind(self, ready: list[Attempt], holds: Sequence[Attempt]) -> bool:
        """Queue `holds` behind `ready` (records claimed with them, each with its permit)
        when the queue is idle: it runs `ready` first, and their handlers that return
        without awaiting hand their permits on to `holds` (one batch, one write of their
        successes, instead of a batch of `ready` before the queue's). False, and nothing
        queued, while the queue drains already or for attempts that are not records'."""
        if self._draining or not isinstance(ready[0].kind.executor, RecordExecutor):
            return False
        self._holds.extend(holds)
        self._start_draining(ready)
        return True

    def _start_draining(self, ready: list[Attempt]) -> None:
        self._draining = True
        first = ready[0] if ready else self._holds[0]
        self._runner._engine.tasks.run_in_background(
            self._drain(ready), BACKGROUND_FAILED, {"table": first.kind.table.name}
        )

    async def _drain(self, ready: list[Attempt]) -> None:
        """Run `ready` (holding their permits), then the queue's attempts as permits
        come, a batch per take of the free ones; then reconcile the alarm with what they
        left."""
        runner = self._runner
        engine = runner._engine
        queued = self._holds
        try:
            if ready:
                await self._run(ready)
            while queued:
                permits = await engine.permits.take(len(queued))
                executor = queued[0].kind.executor
                batch: list[Attempt] = []
                for permit in permits:
                    if not queued or queued[0].kind.executor is not executor:
                        permit()
                        continue
                    hold = queued.popleft()
                    hold.permit = permit
                    batch.append(hold)
                self.reserved -= len(batch)
                await self._run(batch)
        finally:
            self._draining = False
            self.reserved -= len(queued)
            while queued:
                release(engine, queued.popleft())
        await engine.reconcile_now()

    async def _run(self, batch: list[Attempt]) -> None:
        """Run one batch; the attempts it hands to tasks of their own are waited for in
        the background (a storage failure is reported, and the pass's retry alarm
        follows from the rows it left). A record executor runs more of the queue on the
        permits of handlers that return without awaiting, while nobody else waits for a
        permit (see `RecordExecutor.run`)."""
        runner = self._runner
        engine = runner._engine
        executor = batch[0].kind.executor
        waiting: list[asyncio.Task[None]] = []
        started_at = now_ms()
        queued = self._holds

        def refill(count: int) -> list[Attempt]:
            more: list[Attempt] = []
            while queued and len(more) < count and queued[0].kind.executor is executor:
                more.append(queued.popleft())
            self.reserved -= len(more)
            batch.extend(more)  # released with the batch if the run fails
            return more

        def run() -> Awaitable[None]:
            if isinstance(executor, RecordExecutor):
                # A permit given back goes to whoever waits for one first. Nobody can
                # start waiting while the batch's handlers run (they run back to back,
                # with no await between them), so this is asked once per batch.
                handing_on = None if engine.permits.waited_for else refill
                return executor.run(engine, list(batch), started_at, waiting, handing_on)
            return executor.run(engine, batch, started_at, waiting)

        try:
            await runner._run_held(batch, run)
        except Exception as error:
            report_failure(BACKGROUND_FAILED, {"key": batch[0].key}, error)
        if waiting:
            engine.tasks.run_in_background(
                _settled(runner, waiting), BACKGROUND_FAILED, {"key": batch[0].key}
            )


async def _settled(runner: AttemptRunner, waiting: list[asyncio.Task[None]]) -> None:
    """Wait for the attempts a batch handed to tasks of their own; then reconcile the
    alarm with what they left (as `AttemptRunner.start` does)."""
    try:
        await asyncio.gather(*waiting)
    finally:
        if not runner.queue.reserved:  # else the queue reconciles once it has run them
            await runner._engine.reconcile_now()


class Reservation:
    """The attempts of one write that start with it: held, claimed by the write, then run.

    Before the caller's transaction, each attempt due now marks its key running and takes
    a permit if one is free right now and no claim is queued ahead of it (so it never
    goes ahead of a waiter); the others, up to `MAX_QUEUED` queued in the engine, are
    queued for one. The transaction inserts every held record claimed; once its commit
    is durable, those with a permit run at once and the queued ones join the engine's
    `ClaimQueue` (which runs both, those with a permit first, when it was idle). A
    reservation whose record was not inserted gives its permit and key back.
    """

    __slots__ = (
        "_claimed",
        "_holds",
        "_positions",
        "_runner",
        "_started_at",
        "_waiting",
        "all_claimed",
    )

    def __init__(
        self,
        runner: AttemptRunner,
        attempts: Sequence[Attempt],
        positions: Sequence[int],
        *,
        queue: bool,
    ) -> None:
        """Each attempt is a new one (not held: its permit is `no_permit`) of the first row
        of its key in the write: a later row of that key could not be inserted, so an
        earlier one keeps its place. Without `queue`, holding stops at the first attempt
        no permit is free for (a caller whose table has no queued claims: its other
        records are inserted for the timer)."""
        self._runner = runner
        self._holds: dict[str, Attempt] = {}
        self._positions: dict[int, int] = {}
        """The claim (`claim_alone`) of each held record, by its position in the write."""
        self._waiting = 0
        """How many holds wait for a permit (those whose permit is `no_permit`)."""
        self._claimed: Collection[str] = ()
        """The keys the transaction inserted claimed."""
        self._started_at = 0
        self.all_claimed = False
        """Whether every record the transaction inserted was inserted claimed (none needs a
        timer)."""
        engine = runner._engine
        running = engine.running
        try_acquire = engine.permits.try_acquire
        claims = runner.queue
        holds = self._holds
        claims_at = self._positions
        waiting = 0
        alone = 1 if engine.permits.size == 1 else 0
        held_alone = bool(alone)
        room = MAX_QUEUED - claims.reserved
        behind = claims.reserved > 0
        name: str | None = None
        last_kind: AttemptKind | None = None
        busy: dict[str, ActiveExecution] = {}
        for position, attempt in zip(positions, attempts, strict=True):
            key = attempt.key
            kind = attempt.kind
            if kind is not last_kind:  # a write's attempts are mostly of one kind
                last_kind = kind
                if kind.table.name != name:
                    name = kind.table.name
                    busy = running.table(name)
            # `busy` is live: it has the keys held here already.
            if key in busy or attempt.after is not None:
                continue
            if behind:
                # Queued for a permit, as every later one (an attempt's permit is
                # `no_permit` until it has one).
                if not queue or waiting >= room:
                    break
                waiting += 1
                claims_at[position] = QUEUED_CLAIM
            else:
                permit = try_acquire()
                if permit is None:
                    behind = True
                    if not queue or room <= 0:
                        break
                    waiting += 1
                    claims_at[position] = QUEUED_CLAIM
                else:
                    claims_at[position] = alone
                    attempt.permit = permit
            if held_alone:
                attempt.alone = True
            holds[key] = busy[key] = attempt
        self._waiting = waiting
        claims.reserved += waiting

    def __bool__(self) -> bool:
        return bool(self._holds)

    def __contains__(self, key: object) -> bool:
        return key in self._holds

    def claims(self) -> dict[int, int]:
        """The positions, in the write's rows, of the records to insert claimed, each
        with its `claim_alone`."""
        return self._positions

    def claimed(self, keys: Sequence[str] | None, written: int) -> None:
        """In the transaction: records `keys` (`None`: every held one) were inserted
        claimed, of `written` inserted in all (any other one needs the timer)."""
        self._started_at = now_ms()
        holds = self._holds
        if keys is None:
            self._claimed = holds.keys()
            self.all_claimed = len(holds) == written
            for hold in holds.values():
                hold.signal = AbortSignal()
            return
        self._claimed = set(keys)
        self.all_claimed = len(keys) == written
        for key in keys:
            holds[key].signal = AbortSignal()

    def start(self, *, reconcile: bool = True) -> Awaitable[None] | None:
        """After the commit is durable: queue the claimed records that wait for a permit,
        and return the run of those that have one (`None` when there is none, or when the
        queue runs them, ahead of the others: `ClaimQueue.add_behind`); every other hold
        is given back now. The run ends with a reconcile of the alarm, unless
        `reconcile` is False (their executor reconciles as each one ends)."""
        runner = self._runner
        claimed = self._claimed
        holds = self._holds
        if len(claimed) == len(holds):
            # Every hold was claimed (`claimed` is of held keys): those with a permit
            # were held first, the queued after.
            every = list(holds.values())
            split = len(every) - self._waiting
            ready, waiting = every[:split], every[split:]
        else:
            ready = []
            waiting = []
            for key, hold in holds.items():
                if key not in claimed:
                    self._give_back(hold)
                elif hold.permit is no_permit:
                    waiting.append(hold)
                else:
                    ready.append(hold)
        self._holds = {}
        if waiting and ready and reconcile and runner.queue.add_behind(ready, waiting):
            return None
        if waiting:
            runner.queue.add(waiting)
        if not ready:
            return None
        engine = runner._engine
        started_at = self._started_at
        tasks: list[asyncio.Task[None]] = []
        executor = ready[0].kind.executor
        return runner._started(
            ready,
            tasks,
            lambda: executor.run(engine, ready, started_at, tasks),
            reconcile=reconcile,
        )

    def _give_back(self, hold: Attempt) -> None:
        if hold.permit is no_permit:
            self._runner.queue.reserved -= 1
        release(self._runner._engine, hold)

    def release(self) -> None:
        """The write failed or was abandoned: give every permit and key back (a record it
        may have committed is left to the timer and the alarm)."""
        engine = self._runner._engine
        holds = list(self._holds.values())
        self._holds = {}
        for hold in holds:
            self._give_back(hold)
        if holds and engine.options.live_timers:
            engine.refresh_in_background(
                "durability.scheduler.refresh_failed",
                {"table": holds[0].kind.table.name},
            )
