"""Attempts started in batches: one claim statement and one wait for its commit for the
lot, synchronous handlers called in place, their successes stored together.

Every guarantee of a single attempt (`execution.py`) holds for each row of a batch: it
holds its own permit and key lock from before its claim until its outcome is written
and its handler has ended; the claims are committed (`storage.sync()`) before any
handler of the batch is called; every write is generation-fenced. A handler that
returns an awaitable goes on in a task of its own, timed and cancellable, as any
attempt does; one that returns at once needs no task and no timer.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

from .._clock import now_ms
from .._context import SqlStorage
from .._signal import AbortSignal
from .engine import Engine
from .execution import (
    continue_attempt,
    fail_exhausted,
    record_success,
    run_execution,
    settle_error,
)
from .lifecycle import AttemptStartedEvent, LifecycleEventType
from .permits import Release
from .registry import ActiveExecution
from .spec import ExecutionSpec
from .tables import claim_attempt, claim_attempts, is_exhausted
from .tasks import close_unstarted

Row = TypeVar("Row")
T = TypeVar("T")


class Slot:
    """One row of a batch: its execution, key lock and permit until released."""

    __slots__ = ("entry", "permit", "released", "spec")

    def __init__(self, spec: ExecutionSpec, entry: ActiveExecution, permit: Release) -> None:
        self.spec = spec
        self.entry = entry
        self.permit = permit
        self.released = False


async def run_rows(
    engine: Engine,
    rows: Iterable[Row],
    spec_of: Callable[[Row], ExecutionSpec | None],
    *,
    table: str,
) -> list[tuple[str, Exception]]:
    """Run one attempt of each row, in order, in batches of the permits free at the time.

    `spec_of(row)` is the row's execution, or `None` to skip it (it is running here
    already); it is asked when the row is taken. Until the last row is taken, the early
    timer leaves `table` to this run (`Engine.pulling`). Returns once every attempt
    started here has settled: the storage failures met, by key (handler errors are
    settled into their rows).
    """
    pending = deque(rows)
    if not pending:
        return []
    failures: list[tuple[str, Exception]] = []
    waiting: list[asyncio.Task[None]] = []
    taken_all = engine.pulling(table)
    try:
        while pending:
            permits = await engine.permits.take(len(pending))
            specs: list[ExecutionSpec] = []
            while pending and len(specs) < len(permits):
                spec = spec_of(pending.popleft())
                if spec is not None:
                    specs.append(spec)
            if not pending:
                taken_all()
            for spare in permits[len(specs) :]:
                spare()
            if not specs:
                continue
            try:
                await run_batch(engine, specs, permits[: len(specs)], waiting)
            except Exception as error:
                failures.append((specs[0].key, error))
    finally:
        taken_all()
    for task in waiting:
        try:
            await task
        except Exception as error:
            failures.append(("", error))
    return failures


def start_batch(engine: Engine, specs: Sequence[ExecutionSpec]) -> Awaitable[None] | None:
    """Start now the records of `specs` that free permits allow (the rest, and keys
    already running here, are left to a pass): their keys are marked running before
    this returns. The awaitable runs them, then reconciles the alarm with what they
    left; `None` when nothing could start."""
    running = engine.running
    permits: list[Release] = []
    chosen: list[ExecutionSpec] = []
    for spec in specs:
        if spec.key in running.keys(spec.table.name):
            continue
        permit = engine.permits.try_acquire()
        if permit is None:
            break
        permits.append(permit)
        chosen.append(spec)
    if not chosen:
        return None
    waiting: list[asyncio.Task[None]] = []
    slots = mark_slots(engine, chosen, permits, waiting)
    return run_started(engine, slots, waiting, lambda: claim_and_run(engine, slots, waiting))


async def run_started(
    engine: Engine,
    slots: list[Slot],
    waiting: list[asyncio.Task[None]],
    run: Callable[[], Awaitable[None]],
) -> None:
    """`run()` over the marked `slots` started outside a pass; then wait for the attempts
    it handed over and reconcile the alarm with what they left."""
    try:
        await run_marked(engine, slots, run)
    finally:
        for task in waiting:
            await task
    await engine.reconcile_now()


async def run_batch(
    engine: Engine,
    specs: Sequence[ExecutionSpec],
    permits: Sequence[Release],
    waiting: list[asyncio.Task[None]],
) -> None:
    """Run one attempt of each spec (of one table, distinct keys), each owning the permit
    at its index. Attempts whose handler suspended go on in tasks added to `waiting`;
    every other attempt is settled when this returns. Raises only for storage failures.
    """
    slots = mark_slots(engine, specs, permits, waiting)
    await run_marked(engine, slots, lambda: claim_and_run(engine, slots, waiting))


def mark_slots(
    engine: Engine,
    specs: Sequence[ExecutionSpec],
    permits: Sequence[Release],
    waiting: list[asyncio.Task[None]],
) -> list[Slot]:
    """Mark each spec's key running with its permit (a spec that must wait for an older
    attempt of its key goes the single way, in a task added to `waiting`)."""
    running = engine.running
    slots: list[Slot] = []
    for spec, permit in zip(specs, permits, strict=True):
        if spec.after is not None and not spec.after.is_set():
            permit()
            waiting.append(engine.tasks.spawn(run_execution(engine, spec)))
            continue
        entry = running.start(spec.table.name, spec.key, spec.generation, spec.created_at)
        slots.append(Slot(spec, entry, permit))
    return slots


async def run_marked(engine: Engine, slots: list[Slot], run: Callable[[], Awaitable[None]]) -> None:
    """`run()` over the marked `slots`; release every one not handed over, whatever happens."""
    try:
        await run()
    finally:
        for slot in slots:
            if not slot.released:
                release(engine, slot)
        if slots and engine.options.live_timers:
            # The keys are eligible for the timer again: re-arm it for work it skipped.
            engine.refresh_in_background(
                "durability.scheduler.refresh_failed",
                {"table": slots[0].spec.table.name},
            )


async def claim_and_run(
    engine: Engine, slots: list[Slot], waiting: list[asyncio.Task[None]]
) -> None:
    """Claim the marked `slots` in one statement, wait for that commit, run the won ones."""
    if not slots:
        return
    started_at = now_ms()
    errors: list[Exception] = []
    won = _claim(engine, slots, started_at, errors)
    claimed: list[Slot] = []
    for slot in slots:
        if slot.spec.key in won:
            slot.entry.signal = AbortSignal()
            claimed.append(slot)
            continue
        spec = slot.spec
        if not errors and is_exhausted(
            engine.sql, spec.table, spec.key, spec.generation, spec.policy.max_attempts
        ):
            await fail_exhausted(engine, spec)
        release(engine, slot)
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
    engine: Engine, claimed: list[Slot], started_at: int, waiting: list[asyncio.Task[None]]
) -> None:
    """Run the handlers of `claimed` slots, whose claims (at `started_at`) are durable
    already, and settle them; an attempt whose handler suspended goes on in `waiting`."""
    succeeded: list[tuple[Slot, Any]] = []
    failed: list[tuple[Slot, BaseException]] = []
    for slot in claimed:
        spec, signal = slot.spec, slot.entry.signal
        assert signal is not None
        attempt = spec.attempt + 1
        if LifecycleEventType.ATTEMPT_STARTED in spec.listened:
            spec.emit(AttemptStartedEvent(**spec.entity(), timestamp=started_at, attempt=attempt))
        if signal.reason is not None:
            failed.append((slot, signal.reason))  # cancelled or purged since its claim
            continue
        try:
            value = spec.invoke(attempt, signal)
        except (Exception, asyncio.CancelledError) as error:
            failed.append((slot, error))
            continue
        if value is not None and inspect.isawaitable(value):
            _hand_over(engine, slot, attempt, started_at, value, waiting)
            continue
        succeeded.append((slot, value))
    _store_successes(engine, succeeded, started_at, failed)
    for slot, failure in failed:
        await settle_error(engine, slot.spec, slot.spec.attempt + 1, started_at, failure)
        release(engine, slot)


def _claim(engine: Engine, slots: list[Slot], now: int, errors: list[Exception]) -> set[str]:
    """The keys of `slots` whose claim won, in one statement; when that statement fails,
    claimed one by one, so a row the storage refuses fails alone (into `errors`)."""
    rows = [
        (slot.spec.key, slot.spec.generation, slot.spec.attempt)
        for slot in slots
        if slot.spec.attempt < slot.spec.policy.max_attempts
    ]
    if not rows:
        return set()
    table = slots[0].spec.table
    try:
        return at_once(engine, len(rows), lambda sql: claim_attempts(sql, table, rows, now))
    except Exception:
        pass
    won: set[str] = set()
    for key, generation, seen in rows:
        try:
            if claim_attempt(engine.sql, table, key, generation, seen, now) is not None:
                won.add(key)
        except Exception as error:
            errors.append(error)
    return won


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
    slot: Slot,
    attempt: int,
    started_at: int,
    called: Any,
    waiting: list[asyncio.Task[None]],
) -> None:
    """Let the attempt's own task await what its handler returned (and release it)."""
    try:
        task = engine.tasks.spawn(
            continue_attempt(
                engine, slot.spec, slot.entry, slot.permit, attempt, started_at, called
            )
        )
    except BaseException:
        if inspect.iscoroutine(called):
            called.close()
        raise
    task.add_done_callback(lambda _: close_unstarted(called))
    slot.released = True  # the attempt's task owns the permit and the key lock now
    waiting.append(task)


def _store_successes(
    engine: Engine,
    succeeded: list[tuple[Slot, Any]],
    started_at: int,
    failed: list[tuple[Slot, BaseException]],
) -> None:
    """Write every success (set-based when the kind can), then release each row; a
    success that cannot be stored joins `failed`."""
    if not succeeded:
        return
    done = [(slot.spec, slot.spec.attempt + 1, value) for slot, value in succeeded]
    complete_many = done[0][0].complete_many
    stored: list[int | Exception | None] | None = None
    if complete_many is not None:
        try:
            # A savepoint: a completion may read after its write (a count), and a read
            # failing there must undo the write before the one-by-one retry.
            stored = engine.transaction_sync(lambda sql: complete_many(sql, done))
        except Exception:
            stored = None  # one row spoilt the statement: store them one by one
    if stored is None:
        stored = [_complete_one(engine, spec, attempt, value) for spec, attempt, value in done]
    for (slot, value), outcome in zip(succeeded, stored, strict=True):
        if isinstance(outcome, Exception):
            failed.append((slot, outcome))
            continue
        record_success(engine, slot.spec, slot.spec.attempt + 1, started_at, outcome, value)
        release(engine, slot)


def _complete_one(
    engine: Engine, spec: ExecutionSpec, attempt: int, value: Any
) -> int | Exception | None:
    try:
        return spec.complete(engine.sql, value, attempt)
    except Exception as error:
        return error


def release(engine: Engine, slot: Slot) -> None:
    slot.released = True
    slot.permit()
    engine.running.finish(slot.spec.table.name, slot.spec.key, slot.entry)
