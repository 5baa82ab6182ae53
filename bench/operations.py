"""Durable operations and named alarms: throughput, scheduling cost, timer lateness.

    python bench/operations.py [--operations 20000] [--callers 200] [--rounds 3] [--dir DIR]

Everything runs in one process on real files (WAL, every commit synced) and the real clock:

- register -> completed throughput: concurrent callers register no-op operations on
  ONE file-backed object (each call returns once the registration is durable); the
  clock stops when the last one is completed. Beside it, raw sqlite3 doing the same
  row work (insert, claim, complete) with one fsynced commit per operation, the same
  batched 100 operations per commit, and batched `--alarm-concurrency` operations per
  commit (as many as one batch of permits runs: a claim must be committed before its
  handler starts, so that is the most operations one commit can finish), and that
  batching again on the engine's own table and indexes with the least work's
  set-based statements (below), with no runtime around them; then the contract floor
  (`contract_floor.floor_seconds`): only the synced commits the guarantees force (one
  per permit batch of claims) with the least row work, on the record table with just
  two indexes, its records inserted claimed or registered ahead, and with the permits
  split into groups whose syncs overlap, each row with its best ratio in any one round.
  Each is measured `--rounds` times (a fresh database each time) and reported as the
  median with the range, because a shared machine's disk and CPU vary a lot between runs.
  The object runs with the default `alarm_concurrency` (10) and, as a second row,
  with `--wide-concurrency` permits, to show how much of the cost is the permit limit.
  Two ceilings with the default permits follow: the same workload with every sync
  left out (`synchronous=OFF`, commits on the loop; not durable, so not something the
  runtime offers, but no way of syncing can beat it), and on the in-memory runtime;
  beside them the engine with every sync in the runtime's commit threads instead of
  on the loop (what it does when several objects sync at once), so its Python may
  overlap its syncs.
  Then the workload with nothing but its guarantees, on the engine's own table: the
  least work (`LeanOperations`: a call per registration returning once durable,
  multi-row inserts, claims durable before a handler runs and permits held until its
  success is written, set-based claims and completions, and nothing else) on this
  runtime; that with a turn's records claimed by its commit plus the work the API
  forces per operation (`ApiOperations`: the id checked, a future per caller, each
  insert's count read back, a `DurableCall` with its own signal per attempt, the key
  marked running while its handler runs), which any engine behind this API adds;
  and the same least work in bare asyncio and sqlite3 with no runtime at all
  (`BareOperations`: a task per call, one commit per loop turn, the log's fdatasync on
  the loop, and again with it in a thread). Below those, the least work the workload
  allows at all (`least_work.LeastWork`: a five-column table, registrations inserted
  already claimed while permits are free, no task per call), its syncs on the loop and
  again in threads with several in flight, with `--wide-concurrency` permits, and with a
  turn's registrations all claimed by its commit (as the engine claims them); the last
  rows give the engine's rate as a fraction of each. The CPU rows add what the runtime's floor
  costs over a bare task inserting one row.
- named-alarm schedule cost with 1,000 vs 100,000 other occurrences pending (those are
  inserted with SQL to set up quickly; the measured calls go through the API).
- CPU per operation on the in-memory runtime (process time, register -> completed,
  default permits), beside the runtime's own floor (a stub call inserting one row) and
  the least work on this runtime with the engine's claims (`LeanOperations`, claim_all)
  and with the API's work (`ApiOperations`).
  The operations object's handler counts its runs; once the last has run, the
  benchmark waits for no record to be pending. No lifecycle hook, as LeanOperations
  and LeastWork build no event either; a last row counts completions through a hook
  that asks for `attempt_settled` events only (`ListeningBench`, the instrument of
  the runs before 2026-12-07), to show what an event per operation costs.
- lateness of near-term named alarms (due within the min delay, so served by the
  in-memory timer): time the handler starts minus the scheduled time, p50/p99.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import inspect
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from itertools import chain
from pathlib import Path
from typing import Any
from unittest import mock

from contract_floor import AHEAD_PER_COMMIT, floor_seconds
from least_work import bench_least, close_counting, register_all

from durability import (
    AbortSignal,
    Durability,
    DurabilityAlarms,
    DurableAlarmInfo,
    DurableCall,
    LifecycleEventType,
    now_ms,
)
from durability._engine.migrations import migrate
from durability._frozen import frozen_with
from durability._operations import OPERATION_MIGRATIONS
from durability._operations.control import NULL_TEXT, check_id
from durability._serialization import deserialize, serialize
from durability._uuid import fresh_generation, random_uuid
from durability.runtime import (
    AlarmInvocationInfo,
    DurableObject,
    Runtime,
    _commit_threads,
    _opening,
)
from durability.runtime._opening import connect_file


@dataclass
class Settings:
    """Options the benchmark objects read when they are built."""

    alarm_concurrency: int = 10
    claim_all: bool = False
    """`LeanOperations` claims a turn's records in its commit (as the engine does)."""


settings = Settings()
PROBES = 1_000
LEAST_SYNC_THREADS = 4
"""Threads (and most syncs in flight) of the threaded least-work row."""
FLOORS = ((1, False), (1, True), (2, False), (10, False))
"""The contract floor's rows: permit groups syncing at once, records registered ahead."""
TIMERS = 500
FAR_FUTURE_MS = 10 * 365 * 24 * 60 * 60 * 1000


class Completions:
    """Counts completed operations and wakes the benchmark once the expected number have
    completed."""

    def __init__(self) -> None:
        self.completed = 0
        self.target = 0
        self.done = asyncio.Event()

    def expect(self, count: int) -> None:
        """Start counting towards `count`."""
        self.completed = 0
        self.target = count
        self.done.clear()

    def add(self, completed: int) -> None:
        """`completed` more operations completed."""
        self.completed += completed
        if self.completed >= self.target:
            self.done.set()


class CountingBench(DurableObject):
    """A benchmark object whose completed operations the benchmark waits for."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.completions = Completions()

    async def expect(self, count: int) -> None:
        """Arm the completion counter for `count` operations."""
        self.completions.expect(count)

    async def wait_completed(self) -> int:
        """Wait until the expected number completed; return the completed rows stored."""
        await self.completions.done.wait()
        rows = self.ctx.storage.sql.exec(
            "SELECT COUNT(*) AS n FROM durability_calls WHERE status = 'completed'"
        )
        return int(rows.one()["n"])


class OperationsBench(CountingBench):
    """Durable operations whose handler only counts its runs, which wakes the benchmark
    once the last one has run (no lifecycle hook: see `ListeningBench`)."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.durability = Durability(
            context=ctx,
            handlers={"noop": self._noop},
            alarm_concurrency=settings.alarm_concurrency,
            **self._hook(),
        )

    def _hook(self) -> dict[str, Any]:
        """The lifecycle hook options of the `Durability` (none)."""
        return {}

    def _noop(self, call: DurableCall[Any]) -> None:
        self.completions.add(1)

    async def register(self, id: str) -> None:
        """Register one no-op operation; returns once it is durable."""
        await self.durability.noop(id=id)

    async def wait_completed(self) -> int:
        """Wait until every expected handler has run and no record is pending any more
        (its success written); return the completed rows stored."""
        await self.completions.done.wait()
        pending = "SELECT COUNT(*) AS n FROM durability_calls WHERE status = 'pending'"
        while self.ctx.storage.sql.exec(pending).one()["n"]:
            await asyncio.sleep(0)
        return await super().wait_completed()

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.durability.alarm(info)


class ListeningBench(OperationsBench):
    """`OperationsBench` counting completions through a lifecycle hook instead (the
    benchmark's instrument until 2026-12-07): the engine then builds an
    `attempt_settled` event per operation, and the hook reads it."""

    def _hook(self) -> dict[str, Any]:
        return {
            "on_lifecycle_event": self._count,
            "lifecycle_events": [LifecycleEventType.ATTEMPT_SETTLED],
        }

    def _noop(self, call: DurableCall[Any]) -> None:
        return None

    def _count(self, event: Any) -> None:
        if event.type == "attempt_settled" and event.outcome == "completed":
            self.completions.add(1)

    async def wait_completed(self) -> int:
        """Wait until the hook has counted every expected completion."""
        return await CountingBench.wait_completed(self)


class InsertFloor(DurableObject):
    """The runtime's own floor: a stub call that inserts one row and nothing else."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS floor (id TEXT PRIMARY KEY)")

    async def register(self, id: str) -> None:
        """Insert row `id` (durable when the call returns, through the output gate)."""
        self.ctx.storage.sql.exec("INSERT INTO floor (id) VALUES (?)", id)


class ScheduleBench(DurableObject):
    """Named alarms scheduled far ahead, next to many other pending occurrences."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        handlers = {f"probe-{number}": self._noop for number in range(PROBES)}
        self.alarms = DurabilityAlarms(context=ctx, handlers=handlers)

    def _noop(self, info: DurableAlarmInfo) -> None:
        return None

    async def seed(self, pending: int) -> None:
        """Insert `pending` far-future occurrences of other names directly."""
        sql = self.ctx.storage.sql
        at = now_ms() + FAR_FUTURE_MS
        for number in range(pending):
            sql.exec(
                "INSERT INTO durability_alarms (name, generation_id, status, scheduled_at, "
                "next_attempt_at, attempt, created_at) VALUES (?, ?, 'pending', ?, ?, 0, ?)",
                f"seeded-{number}",
                f"g{number}",
                at + number,
                at + number,
                at,
            )

    async def measure(self) -> float:
        """Seconds for PROBES schedule calls (new occurrences, one day ahead)."""
        at = now_ms() + 24 * 60 * 60 * 1000
        started = time.perf_counter()
        for number in range(PROBES):
            await self.alarms.named(f"probe-{number}")(at + number)
        return time.perf_counter() - started

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.alarms.alarm(info)


class TimerBench(DurableObject):
    """Near-term named alarms that record how late their handler started."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.lateness_ms: list[float] = []
        self.done = asyncio.Event()
        handlers = {f"timer-{number}": self._fire for number in range(TIMERS)}
        self.alarms = DurabilityAlarms(context=ctx, handlers=handlers)

    def _fire(self, info: DurableAlarmInfo) -> None:
        self.lateness_ms.append(time.time() * 1000 - info.scheduled_time)
        if len(self.lateness_ms) == TIMERS:
            self.done.set()

    async def start(self, lead_ms: int, spread_ms: int, seed: int) -> None:
        """Schedule every timer between `lead_ms` and `lead_ms + spread_ms` from now."""
        rng = random.Random(seed)
        now = now_ms()
        for number in range(TIMERS):
            await self.alarms.named(f"timer-{number}")(now + lead_ms + rng.randrange(spread_ms))

    async def lateness(self) -> list[float]:
        """Wait for every timer; return each one's lateness in ms."""
        await self.done.wait()
        return sorted(self.lateness_ms)

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.alarms.alarm(info)


RUNTIME_CHUNK = 16
"""Rows one statement names at most on the runtime (as the engine's statements: a query
there takes at most 100 bindings, as on Cloudflare)."""

BARE_CHUNK = 128
"""Rows one statement names at most in bare sqlite3 (no such limit there)."""


@functools.cache
def _lean_statement(template: str, width: int, count: int) -> str:
    """`template` with `count` rows of `width` placeholders (a few distinct texts)."""
    row = "(" + ", ".join("?" * width) + ")"
    return template.format(rows=", ".join([row] * count))


_LEAN_INSERT = (
    "INSERT INTO durability_calls (id, operation, payload, status, attempt, next_attempt_at, "
    "generation_id, created_at) SELECT column1, column2, column3, 'pending', 0, column4, "
    "column5, column6 FROM (VALUES {rows}) WHERE true ON CONFLICT(id) DO NOTHING"
)
_LEAN_INSERT_CLAIMED = (
    "INSERT INTO durability_calls (id, operation, payload, status, attempt, next_attempt_at, "
    "generation_id, created_at, claim_alone) SELECT column1, column2, column3, 'pending', 1, "
    "column4, column5, column6, 2 FROM (VALUES {rows}) WHERE true ON CONFLICT(id) DO NOTHING"
)
"""`_LEAN_INSERT` with each record's first attempt claimed (ahead of its permit)."""

_LEAN_CLAIM = (
    "WITH c(k, g) AS (VALUES {rows}) UPDATE durability_calls SET attempt = attempt + 1 FROM c "
    "WHERE durability_calls.id = c.k AND durability_calls.generation_id = c.g "
    "AND durability_calls.attempt = 0 AND +durability_calls.status = 'pending'"
)
_LEAN_COMPLETE = (
    "WITH c(k, g) AS (VALUES {rows}) UPDATE durability_calls SET status = 'completed', "
    "completed_at = ?, result = 'null' FROM c WHERE durability_calls.id = c.k "
    "AND durability_calls.generation_id = c.g AND durability_calls.attempt = 1 "
    "AND +durability_calls.status = 'pending'"
)


Claim = tuple[str, str]
"""A claimed record of the least-work models: its id and generation."""


class Turn:
    """One loop turn's transaction of the least-work models: the future its callers wait
    on (all of them: one per turn), the records it claimed, the successes it wrote."""

    __slots__ = ("claimed", "completed", "registered")

    def __init__(
        self, registered: asyncio.Future[None] | None, claimed: list[Claim], completed: int
    ) -> None:
        self.registered = registered
        self.claimed = claimed
        self.completed = completed


class LeanWork:
    """The records and permits of the least-work models, and the row work of one turn's
    transaction: that turn's new records, the last turn's successes, and the claims of
    the permits those freed. `chunk`: rows one statement names at most. `claim_all`: a
    turn's new records are all inserted claimed (as the engine's registrations are), so
    no claim statement follows; the no-op handlers run one after another once durable."""

    def __init__(self, permits: int, chunk: int, claim_all: bool = False) -> None:
        self.permits = permits
        self.chunk = chunk
        self.claim_all = claim_all
        self.rows: list[tuple[str, str, str, int, str, int]] = []
        self.registered: asyncio.Future[None] | None = None
        self.unclaimed: deque[Claim] = deque()
        self.succeeded: list[Claim] = []

    def add(self, id: str, now: int) -> asyncio.Future[None]:
        """Queue the registration of `id`; the future (its turn's) ends once durable."""
        registered = self.registered
        if registered is None:
            registered = self.registered = asyncio.get_running_loop().create_future()
        self.rows.append((id, "noop", "null", now, random_uuid(), now))
        return registered

    def write(self, execute: Callable[[str, list[Any]], object], now: int) -> Turn:
        """Run this turn's statements with `execute`; what its commit answers and claims."""
        rows, self.rows = self.rows, []
        registered, self.registered = self.registered, None
        chunk = self.chunk
        insert = _LEAN_INSERT_CLAIMED if self.claim_all else _LEAN_INSERT
        for first in range(0, len(rows), chunk):
            part = rows[first : first + chunk]
            execute(_lean_statement(insert, 6, len(part)), [*chain(*part)])
        succeeded, self.succeeded = self.succeeded, []
        for first in range(0, len(succeeded), chunk):
            done = succeeded[first : first + chunk]
            execute(_lean_statement(_LEAN_COMPLETE, 2, len(done)), [*chain(*done), now])
        if self.claim_all:
            return Turn(registered, [(row[0], row[4]) for row in rows], len(succeeded))
        self.unclaimed.extend((row[0], row[4]) for row in rows)
        self.permits += len(succeeded)
        claimed = [self.unclaimed.popleft() for _ in range(min(self.permits, len(self.unclaimed)))]
        self.permits -= len(claimed)
        for first in range(0, len(claimed), chunk):
            part = claimed[first : first + chunk]
            execute(_lean_statement(_LEAN_CLAIM, 2, len(part)), [*chain(*part)])
        return Turn(registered, claimed, len(succeeded))

    def durable(self, turn: Turn) -> bool:
        """`turn`'s commit is durable: answer its callers and run the handlers it claimed
        (no-ops that return at once); whether another turn has work."""
        if turn.registered is not None:
            turn.registered.set_result(None)
        self.succeeded.extend(turn.claimed)
        return bool(self.succeeded or self.unclaimed)

    def failed(self, turn: Turn, error: BaseException) -> None:
        """`turn`'s commit could not be made durable: its callers get `error`."""
        if turn.registered is not None:
            turn.registered.set_exception(error)


class LeanOperations(CountingBench):
    """A model of the least work of goal 1's workload on this runtime, on the engine's
    own table (same columns and indexes): an engine must do at least this work through
    the same runtime, so unless it does it more cheaply, it is no faster.

    Kept: a stub call per registration that returns once its record is durable; the
    registrations of a turn in multi-row inserts, answered through one future; at most
    `settings.alarm_concurrency` attempts at once, each claimed durably before its
    handler runs and holding its permit until its success is written; claims and
    completions set-based, written with the next turn's transaction. Left out:
    everything else the engine does (ids checked, payloads and results serialized,
    duplicate and failure outcomes, the alarm, timers, lifecycle events, abort signals,
    watchers, retries, timeouts).
    """

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        migrate(ctx.storage, "operations", OPERATION_MIGRATIONS)
        self.work: LeanWork | ApiWork = LeanWork(
            settings.alarm_concurrency, RUNTIME_CHUNK, settings.claim_all
        )
        self.flushing = False

    async def register(self, id: str) -> None:
        """Register one no-op operation; returns once it is durable."""
        registered = self.work.add(id, now_ms())
        self._flush_soon()
        await registered

    def _flush_soon(self) -> None:
        """Start a turn's transaction as instance work, unless one is starting already."""
        if not self.flushing:
            self.flushing = True
            self.ctx.wait_until(self._flush())

    async def _flush(self) -> None:
        """One turn's transaction; once durable, the next one's (registrations that came
        meanwhile start their own at once)."""
        self.flushing = False
        sql = self.ctx.storage.sql
        turn = self.work.write(lambda statement, bindings: sql.exec(statement, *bindings), now_ms())
        self.completions.add(turn.completed)
        try:
            await self.ctx.storage.sync()
        except Exception as error:
            self.work.failed(turn, error)
            raise
        if self.work.durable(turn):
            self._flush_soon()

    async def schema(self) -> list[str]:
        """The engine's `durability_calls` table and its indexes, as CREATE statements."""
        rows = self.ctx.storage.sql.exec(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'durability_calls' "
            "AND sql IS NOT NULL ORDER BY type DESC"
        )
        return [str(row["sql"]) for row in rows]


_CHANGES = "SELECT changes()"


class ApiTurn(Turn):
    """A turn of `ApiWork`: its registrations and each caller's own future."""

    __slots__ = ("futures", "rows")

    def __init__(
        self, rows: list[tuple[str, str, str, int, str, int]], futures: list[asyncio.Future[None]]
    ) -> None:
        super().__init__(None, [], 0)
        self.rows = rows
        self.futures = futures


class ApiWork:
    """`LeanWork` with a turn's records claimed by its commit, plus the work the API
    forces per operation: the id checked and the payload serialized, a fresh
    generation, a future per caller (each learns its own outcome), each insert's count
    read back (a caller whose id another operation holds must be told); and per attempt
    a `DurableCall` with an `AbortSignal` of its own, the key marked running while its
    handler runs, the handler called and its result serialized. No permit is tracked:
    the handlers return at once and run one after another."""

    def __init__(self, chunk: int, handler: Callable[[DurableCall[Any]], object]) -> None:
        self.chunk = chunk
        self.handler = handler
        self.rows: list[tuple[str, str, str, int, str, int]] = []
        self.futures: list[asyncio.Future[None]] = []
        self.succeeded: list[Claim] = []
        self.running: dict[str, str] = {}

    def add(self, id: object, now: int, payload: object = None) -> asyncio.Future[None]:
        """Queue the registration of `id`; its own future ends once it is durable."""
        key = check_id(id)
        text = NULL_TEXT if payload is None else serialize(payload, "payload")
        future = asyncio.get_running_loop().create_future()
        self.rows.append((key, "noop", text, now, fresh_generation(), now))
        self.futures.append(future)
        return future

    def write(self, execute: Callable[[str, list[Any]], Any], now: int) -> ApiTurn:
        """Run this turn's statements with `execute` (each insert's count read back)."""
        rows, self.rows = self.rows, []
        futures, self.futures = self.futures, []
        chunk = self.chunk
        for first in range(0, len(rows), chunk):
            part = rows[first : first + chunk]
            execute(_lean_statement(_LEAN_INSERT_CLAIMED, 6, len(part)), [*chain(*part)])
            for (count,) in execute(_CHANGES, []).raw():
                if count != len(part):
                    raise AssertionError(f"{len(part) - count} ids were taken already")
        succeeded, self.succeeded = self.succeeded, []
        for first in range(0, len(succeeded), chunk):
            done = succeeded[first : first + chunk]
            execute(_lean_statement(_LEAN_COMPLETE, 2, len(done)), [*chain(*done), now])
        return ApiTurn(rows, futures)

    def durable(self, turn: Turn) -> bool:
        """`turn`'s commit is durable: answer each caller and run each handler (their
        successes go into the next turn); whether another turn has work."""
        assert isinstance(turn, ApiTurn)
        for future in turn.futures:
            if not future.done():
                future.set_result(None)
        handler, running, succeeded = self.handler, self.running, self.succeeded
        for key, operation, text, _, generation, _ in turn.rows:
            running[key] = generation
            call: DurableCall[Any] = frozen_with(
                DurableCall,
                {
                    "id": key,
                    "operation": operation,
                    "payload": None if text == NULL_TEXT else deserialize(text),
                    "attempt": 1,
                    "signal": AbortSignal(),
                    "idempotency_key": "durability-call:v1:bench:noop:" + key,
                },
            )
            result = handler(call)
            if result is not None:
                if inspect.isawaitable(result):
                    raise AssertionError("the model's handlers return at once")
                serialize(result, "result")
            del running[key]
            succeeded.append((key, generation))
        return bool(succeeded or self.rows)

    def failed(self, turn: Turn, error: BaseException) -> None:
        """`turn`'s commit could not be made durable: each caller gets `error`."""
        assert isinstance(turn, ApiTurn)
        for future in turn.futures:
            if not future.done():
                future.set_exception(error)


class ApiOperations(LeanOperations):
    """`LeanOperations` (a turn's records claimed by its commit) doing the work the API
    forces per operation (`ApiWork`): what any engine behind this API must add to the
    least work on this runtime. Its handler counts its runs, as `OperationsBench`'s."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.work = ApiWork(RUNTIME_CHUNK, self._noop)

    def _noop(self, call: DurableCall[Any]) -> None:
        self.completions.add(1)

    async def wait_completed(self) -> int:
        """Wait until every handler has run and the last successes are written."""
        await self.completions.done.wait()
        while self.work.succeeded:
            self._flush_soon()
            await asyncio.sleep(0)
        return await CountingBench.wait_completed(self)


class BareOperations:
    """`LeanOperations` without the runtime: plain asyncio and sqlite3 on one file.

    Each registration runs in a task of its own (as a call into an object does on the
    runtime) and waits for its turn's commit and sync. One transaction per loop turn
    (`LeanWork.write`, statements of up to `BARE_CHUNK` rows). Its `COMMIT` runs on the
    loop; the `fdatasync` of the log too, or with `threaded` in a thread, one at a time,
    while the loop goes on with the next turns (a commit's callers and handlers then
    wait for a sync that began after its `COMMIT`).
    """

    def __init__(self, file: Path, schema: list[str], permits: int, threaded: bool) -> None:
        self.file = file
        self.connection = sqlite3.connect(file, isolation_level=None)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=NORMAL")
        for statement in schema:
            self.connection.execute(statement)
        self.log = -1
        self.loop = asyncio.get_running_loop()
        self.work = LeanWork(permits, BARE_CHUNK)
        self.completions = Completions()
        self.syncer = ThreadPoolExecutor(1) if threaded else None
        self.unsynced: list[Turn] = []
        self.syncing = False
        self.scheduled = False

    async def call(self, id: str) -> None:
        """A registration delivered as a call: in a task of its own."""
        await self.loop.create_task(self._register(id))

    async def _register(self, id: str) -> None:
        """Queue one registration for this turn's transaction; return once it is durable."""
        registered = self.work.add(id, time.time_ns() // 1_000_000)
        self._commit_soon()
        await registered

    def _commit_soon(self) -> None:
        """Make this turn's transaction once the loop turn's other work is done."""
        if not self.scheduled:
            self.scheduled = True
            self.loop.call_soon(self._commit)

    def _commit(self) -> None:
        """Write and commit the turn's transaction; sync it here or hand it to the thread."""
        self.scheduled = False
        connection = self.connection
        connection.execute("BEGIN IMMEDIATE")
        turn = self.work.write(connection.execute, time.time_ns() // 1_000_000)
        self.completions.add(turn.completed)
        connection.execute("COMMIT")
        if self.log < 0:
            self.log = os.open(f"{self.file}-wal", os.O_RDWR)
        if self.syncer is None:
            os.fdatasync(self.log)
            self._durable(turn)
            return
        self.unsynced.append(turn)
        if not self.syncing:
            self._sync()

    def _sync(self) -> None:
        """Sync in the thread for every commit made so far; then release them."""
        assert self.syncer is not None
        covered, self.unsynced = self.unsynced, []
        self.syncing = True
        synced = self.loop.run_in_executor(self.syncer, os.fdatasync, self.log)
        synced.add_done_callback(partial(self._synced, covered))

    def _synced(self, covered: list[Turn], synced: asyncio.Future[None]) -> None:
        """The sync of `covered` ended: release them (or fail their callers). A turn that
        their handlers' successes start is committed before the next sync begins, so it
        is not left for the sync after that."""
        self.syncing = False
        error = synced.exception()
        for turn in covered:
            if error is None:
                self._durable(turn)
            else:
                self.work.failed(turn, error)
        if self.unsynced and not self.scheduled:
            self._sync()

    def _durable(self, turn: Turn) -> None:
        """`turn` is durable: release it, and make the next turn if there is work."""
        if self.work.durable(turn):
            self._commit_soon()

    def close(self) -> int:
        """Close the file; the completed records it holds."""
        return close_counting(self.connection, "durability_calls", self.log, self.syncer)


async def calls_schema() -> list[str]:
    """The engine's `durability_calls` CREATE statements (from an in-memory object)."""
    async with Runtime(bindings={"OPS": LeanOperations}) as rt:
        statements: list[str] = await rt.env.OPS.get_by_name("schema").schema()
        return statements


async def bench_bare(
    file: Path, operations: int, callers: int, permits: int, *, threaded: bool = False
) -> float:
    """Seconds for `BareOperations` to register and complete `operations` no-ops."""
    bare = BareOperations(file, await calls_schema(), permits, threaded)
    bare.completions.expect(operations)
    started = time.perf_counter()
    await register_all(bare.call, operations, callers)
    await bare.completions.done.wait()
    elapsed = time.perf_counter() - started
    while bare.syncing:  # the last commit's sync (the clock has stopped)
        await asyncio.sleep(0.001)
    assert bare.close() == operations
    return elapsed


CREATE_CALLS = (
    "CREATE TABLE calls (id TEXT PRIMARY KEY, operation TEXT NOT NULL, payload TEXT NOT NULL, "
    "status TEXT NOT NULL, result TEXT, attempt INTEGER NOT NULL DEFAULT 0, "
    "next_attempt_at INTEGER NOT NULL, completed_at INTEGER)"
)


def raw_row_work(connection: sqlite3.Connection, operations: int, per_commit: int) -> None:
    """The row work of `operations` operations (insert, claim, complete) on the `calls`
    table, `per_commit` operations per transaction."""
    for first in range(0, operations, per_commit):
        connection.execute("BEGIN IMMEDIATE")
        for number in range(first, min(first + per_commit, operations)):
            key = f"op-{number}"
            connection.execute(
                "INSERT INTO calls (id, operation, payload, status, next_attempt_at) "
                "VALUES (?, 'noop', '{\"kind\":\"value\",\"value\":null}', 'pending', ?)",
                (key, number),
            )
            connection.execute(
                "UPDATE calls SET attempt = attempt + 1 WHERE id = ? AND status = 'pending'",
                (key,),
            )
            connection.execute(
                "UPDATE calls SET status = 'completed', result = 'null', completed_at = ? "
                "WHERE id = ? AND status = 'pending' AND attempt = 1",
                (number, key),
            )
        connection.execute("COMMIT")


def _timed_raw(
    file: Path,
    schema: list[str],
    table: str,
    operations: int,
    work: Callable[[sqlite3.Connection], object],
) -> float:
    """Seconds `work` takes on a new synced WAL file holding `schema`; then checks that
    `table` holds `operations` completed rows."""
    connection = sqlite3.connect(file, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        for statement in schema:
            connection.execute(statement)
        started = time.perf_counter()
        work(connection)
        elapsed = time.perf_counter() - started
        (done,) = connection.execute(
            f"SELECT COUNT(*) FROM {table} WHERE status = 'completed'"
        ).fetchone()
        assert done == operations, (done, operations)
        return elapsed
    finally:
        connection.close()


def bench_raw(directory: Path, operations: int, per_commit: int) -> float:
    """Seconds for raw sqlite3 to insert, claim and complete `operations` rows."""
    file = directory / f"raw-{per_commit}-{time.monotonic_ns()}.sqlite3"
    return _timed_raw(
        file,
        [CREATE_CALLS],
        "calls",
        operations,
        lambda connection: raw_row_work(connection, operations, per_commit),
    )


def lean_row_work(connection: sqlite3.Connection, operations: int, permits: int) -> None:
    """`LeanWork`'s row work of `operations` operations, `permits` registrations,
    successes and claims per transaction (in a running loop: its futures need one, though
    nothing awaits them)."""
    work = LeanWork(permits, BARE_CHUNK)
    numbers = iter(range(operations))
    more = True
    while more:
        now = time.time_ns() // 1_000_000
        for _, number in zip(range(permits), numbers, strict=False):
            work.add(f"op-{number}", now)
        connection.execute("BEGIN IMMEDIATE")
        turn = work.write(connection.execute, now)
        connection.execute("COMMIT")
        more = work.durable(turn)


async def bench_raw_table(file: Path, operations: int, permits: int) -> float:
    """Seconds for raw sqlite3 to do the least work's row work on the engine's own table
    and indexes (`lean_row_work`), with no runtime and no task."""
    return _timed_raw(
        file,
        await calls_schema(),
        "durability_calls",
        operations,
        lambda connection: lean_row_work(connection, operations, permits),
    )


async def bench_operations(
    directory: Path | None,
    operations: int,
    callers: int,
    alarm_concurrency: int,
    clock: Any = None,
    binding: type[DurableObject] = OperationsBench,
) -> float:
    """Seconds from the first registration until all `operations` are completed
    (`directory=None`: on the in-memory runtime; `binding`: `LeanOperations` for the
    floor)."""
    settings.alarm_concurrency = alarm_concurrency
    async with Runtime(path=directory, bindings={"OPS": binding}, clock=clock) as rt:
        bench = rt.env.OPS.get_by_name("operations")
        await bench.expect(operations)
        started = time.perf_counter()
        await register_all(bench.register, operations, callers)
        completed = await bench.wait_completed()
        elapsed = time.perf_counter() - started
        assert completed == operations, (completed, operations)
        return elapsed


class _WallClock:
    """The wall clock, but not the runtime's own: commits then run on the loop."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


async def bench_unsynced(directory: Path, operations: int, callers: int) -> float:
    """`bench_operations` with default permits and no sync at all (`synchronous=OFF`,
    commits on the loop): NOT durable, so not a mode of the runtime, but the most any way
    of syncing could reach with this engine on this machine."""

    def unsynced(file: Path, *, threaded: bool) -> sqlite3.Connection:
        connection = connect_file(file, threaded=threaded)
        connection.execute("PRAGMA synchronous=OFF")
        return connection

    with mock.patch.object(_opening, "connect_file", unsynced):
        return await bench_operations(directory, operations, callers, 10, clock=_WallClock())


async def bench_thread_synced(directory: Path, operations: int, callers: int) -> float:
    """`bench_operations` with default permits and every sync in the runtime's commit
    threads (as when several objects sync at once), never on the loop: whether the
    engine's Python overlapping its syncs beats syncing on the loop."""
    with mock.patch.object(_commit_threads, "QUICK_SYNC_SECONDS", -1.0):
        return await bench_operations(directory, operations, callers, 10)


async def cpu_per_call(binding: type[DurableObject], operations: int, callers: int) -> float:
    """Process CPU seconds per call of `callers` concurrent callers making `operations`
    `register` calls on one in-memory object (for operations: until all completed)."""
    settings.alarm_concurrency = 10
    async with Runtime(bindings={"OBJ": binding}) as rt:
        bench = rt.env.OBJ.get_by_name("cpu")
        counted = issubclass(binding, CountingBench)
        if counted:
            await bench.expect(operations)
        started = time.process_time()
        await register_all(bench.register, operations, callers)
        if counted:
            assert await bench.wait_completed() == operations
        return (time.process_time() - started) / operations


async def bare_cpu_per_call(operations: int, callers: int) -> float:
    """Process CPU seconds per call of what the runtime's floor does, in bare asyncio and
    sqlite3: a task per call inserting one row into an in-memory database, its result
    waiting for the commit of its loop turn."""
    connection = sqlite3.connect(":memory:", isolation_level=None)
    connection.execute("CREATE TABLE floor (id TEXT PRIMARY KEY)")
    loop = asyncio.get_running_loop()
    turn: list[asyncio.Future[None]] = []

    def commit() -> None:
        connection.execute("COMMIT")
        turn.pop().set_result(None)

    async def insert(id: str) -> None:
        if not turn:
            connection.execute("BEGIN IMMEDIATE")
            turn.append(loop.create_future())
            loop.call_soon(commit)
        committed = turn[0]
        connection.execute("INSERT INTO floor (id) VALUES (?)", (id,))
        await committed

    async def call(id: str) -> None:
        await loop.create_task(insert(id))

    started = time.process_time()
    await register_all(call, operations, callers)
    elapsed = time.process_time() - started
    connection.close()
    return elapsed / operations


async def bench_schedule(directory: Path, pending: int) -> float:
    """Seconds for PROBES schedule calls with `pending` other occurrences pending."""
    async with Runtime(path=directory / "schedule", bindings={"S": ScheduleBench}) as rt:
        bench = rt.env.S.get_by_name(f"pending-{pending}")
        await bench.seed(pending)
        return float(await bench.measure())


async def bench_lateness(directory: Path) -> list[float]:
    """Lateness in ms of TIMERS alarms due 50 ms to 2 s ahead."""
    async with Runtime(path=directory / "timers", bindings={"T": TimerBench}) as rt:
        bench = rt.env.T.get_by_name("timers")
        await bench.start(50, 2_000, 1)
        return [float(value) for value in await bench.lateness()]


def _percentile(sorted_values: list[float], fraction: float) -> float:
    index = min(len(sorted_values) - 1, round(fraction * (len(sorted_values) - 1)))
    return sorted_values[index]


def _rates(count: int, seconds: list[float]) -> tuple[float, str]:
    """The median rate of `count` items over runs of `seconds`, and its range as text."""
    rates = sorted(count / value for value in seconds)
    median = statistics.median(rates)
    if len(rates) == 1:
        return median, f"{median:,.0f} ops/s"
    return median, f"{median:,.0f} ops/s ({rates[0]:,.0f} to {rates[-1]:,.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--operations", type=int, default=20_000, help="operations to run")
    parser.add_argument("--callers", type=int, default=200, help="concurrent callers")
    parser.add_argument(
        "--alarm-concurrency", type=int, default=10, help="the object's permits (default 10)"
    )
    parser.add_argument(
        "--wide-concurrency",
        type=int,
        default=100,
        help="permits of the second durability row (0 leaves it out)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="runs of each throughput row")
    parser.add_argument(
        "--raw-operations",
        type=int,
        default=5_000,
        help="raw sqlite3 ops, 1 commit each (fewer measure too briefly on a shared disk)",
    )
    parser.add_argument(
        "--dir", type=Path, default=Path.cwd(), help="where the databases go (a real disk)"
    )
    args = parser.parse_args()
    concurrencies = [args.alarm_concurrency]
    if args.wide_concurrency:
        concurrencies.append(args.wide_concurrency)
    raw_one: list[float] = []
    raw_batched: list[float] = []
    raw_permits: list[float] = []
    raw_table: list[float] = []
    floors: dict[tuple[int, bool], list[float]] = {floor: [] for floor in FLOORS}
    runtime: dict[int, list[float]] = {concurrency: [] for concurrency in concurrencies}
    cpu: dict[str, list[float]] = {
        key: [] for key in ("operations", "listening", "floor", "bare", "lean-all", "api")
    }
    references: dict[str, list[float]] = {
        "unsynced": [],
        "thread-synced": [],
        "memory": [],
        "lean": [],
        "lean-all": [],
        "api": [],
        "bare": [],
        "bare-threaded": [],
        "least": [],
        "least-wide": [],
        "least-all": [],
        "least-threaded": [],
    }
    with tempfile.TemporaryDirectory(prefix="durability-bench-", dir=args.dir) as tmp:
        directory = Path(tmp)
        for round_number in range(args.rounds):
            here = directory / f"round-{round_number}"
            here.mkdir()
            raw_one.append(bench_raw(here, args.raw_operations, 1))
            raw_batched.append(bench_raw(here, args.operations, 100))
            raw_permits.append(bench_raw(here, args.operations, args.alarm_concurrency))
            raw_table.append(
                asyncio.run(
                    bench_raw_table(
                        here / "raw-table.sqlite3", args.operations, args.alarm_concurrency
                    )
                )
            )
            for groups, ahead in FLOORS:
                floors[groups, ahead].append(
                    floor_seconds(
                        here / f"floor-{groups}-{ahead}.sqlite3",
                        args.operations,
                        args.alarm_concurrency,
                        groups,
                        ahead=ahead,
                    )
                )
            for concurrency in concurrencies:
                runtime[concurrency].append(
                    asyncio.run(
                        bench_operations(
                            here / f"runtime-{concurrency}",
                            args.operations,
                            args.callers,
                            concurrency,
                        )
                    )
                )
            references["unsynced"].append(
                asyncio.run(bench_unsynced(here / "unsynced", args.operations, args.callers))
            )
            references["thread-synced"].append(
                asyncio.run(
                    bench_thread_synced(here / "thread-synced", args.operations, args.callers)
                )
            )
            references["memory"].append(
                asyncio.run(bench_operations(None, args.operations, args.callers, 10))
            )
            for key, claim_all in (("lean", False), ("lean-all", True)):
                settings.claim_all = claim_all
                references[key].append(
                    asyncio.run(
                        bench_operations(
                            here / key,
                            args.operations,
                            args.callers,
                            args.alarm_concurrency,
                            binding=LeanOperations,
                        )
                    )
                )
            settings.claim_all = False
            references["api"].append(
                asyncio.run(
                    bench_operations(
                        here / "api",
                        args.operations,
                        args.callers,
                        args.alarm_concurrency,
                        binding=ApiOperations,
                    )
                )
            )
            references["bare"].append(
                asyncio.run(
                    bench_bare(
                        here / "bare.sqlite3",
                        args.operations,
                        args.callers,
                        args.alarm_concurrency,
                    )
                )
            )
            references["bare-threaded"].append(
                asyncio.run(
                    bench_bare(
                        here / "bare-threaded.sqlite3",
                        args.operations,
                        args.callers,
                        args.alarm_concurrency,
                        threaded=True,
                    )
                )
            )
            for key, threads, permits, claim_all in (
                ("least", 0, args.alarm_concurrency, False),
                ("least-wide", 0, args.wide_concurrency or args.alarm_concurrency, False),
                ("least-all", 0, args.alarm_concurrency, True),
                ("least-threaded", LEAST_SYNC_THREADS, args.alarm_concurrency, False),
            ):
                references[key].append(
                    asyncio.run(
                        bench_least(
                            here / f"{key}.sqlite3",
                            args.operations,
                            args.callers,
                            permits,
                            threads,
                            claim_all=claim_all,
                        )
                    )
                )
            cpu["floor"].append(
                asyncio.run(cpu_per_call(InsertFloor, args.operations, args.callers))
            )
            cpu["bare"].append(asyncio.run(bare_cpu_per_call(args.operations, args.callers)))
            settings.claim_all = True
            cpu["lean-all"].append(
                asyncio.run(cpu_per_call(LeanOperations, args.operations, args.callers))
            )
            settings.claim_all = False
            cpu["api"].append(
                asyncio.run(cpu_per_call(ApiOperations, args.operations, args.callers))
            )
            cpu["operations"].append(
                asyncio.run(cpu_per_call(OperationsBench, args.operations, args.callers))
            )
            cpu["listening"].append(
                asyncio.run(cpu_per_call(ListeningBench, args.operations, args.callers))
            )
            print(f"round {round_number + 1} of {args.rounds} done", file=sys.stderr)
        schedule = {n: asyncio.run(bench_schedule(directory, n)) for n in (1_000, 100_000)}
        print("schedule cost done", file=sys.stderr)
        lateness = asyncio.run(bench_lateness(directory))

    raw_rate, raw_text = _rates(args.raw_operations, raw_one)
    batched_rate, batched_text = _rates(args.operations, raw_batched)
    permits_rate, permits_text = _rates(args.operations, raw_permits)
    table_rate, table_text = _rates(args.operations, raw_table)
    rows = [
        (
            "raw sqlite3: insert, claim, complete; 1 commit per op",
            f"{args.raw_operations:,}",
            raw_text,
        ),
        (
            "raw sqlite3: the same, 100 ops per commit",
            f"{args.operations:,}",
            f"{batched_text}, {batched_rate / raw_rate:.1f}x",
        ),
        (
            f"raw sqlite3: the same, {args.alarm_concurrency} ops per commit (one permit batch)",
            f"{args.operations:,}",
            f"{permits_text}, {permits_rate / raw_rate:.1f}x",
        ),
        (
            f"raw sqlite3: the least work's set-based statements on the engine's own table and "
            f"indexes, {args.alarm_concurrency} ops per commit",
            f"{args.operations:,}",
            f"{table_text}, {table_rate / raw_rate:.1f}x",
        ),
    ]
    for (groups, ahead), seconds in floors.items():
        rate, text = _rates(args.operations, seconds)
        best = max(
            (args.operations / floor) / (args.raw_operations / raw)
            for floor, raw in zip(seconds, raw_one, strict=True)
        )
        if ahead:
            label = (
                f"the same, registered ahead ({AHEAD_PER_COMMIT:,} per commit), then claimed "
                "by an update"
            )
        elif groups > 1:
            label = f"the same, the permits in {groups} groups syncing at once (threads)"
        else:
            label = (
                "contract floor, raw sqlite3: the record table (2 indexes), a synced commit per "
                f"{args.alarm_concurrency} claims, inserted claimed (contract_floor)"
            )
        rows.append(
            (
                label,
                f"{args.operations:,}",
                f"{text}, {rate / raw_rate:.1f}x (at most {best:.1f}x in a round)",
            )
        )
    for concurrency, seconds in runtime.items():
        rate, text = _rates(args.operations, seconds)
        rows.append(
            (
                f"durability: register -> completed, 1 object, {args.callers} callers, "
                f"alarm_concurrency={concurrency}",
                f"{args.operations:,}",
                f"{text}, {rate / raw_rate:.1f}x",
            )
        )
    for key, label in (
        ("unsynced", "ceiling: the same (alarm_concurrency=10) with no sync at all (NOT durable)"),
        (
            "thread-synced",
            "the same (alarm_concurrency=10) with every sync in a thread, none on the loop",
        ),
        ("memory", "ceiling: the same on the in-memory runtime (no disk at all)"),
        (
            "lean",
            f"least work, alarm_concurrency={args.alarm_concurrency}: on this runtime, "
            "no engine (LeanOperations)",
        ),
        (
            "lean-all",
            "the same with a turn's records all claimed by its commit, as the engine's "
            "(LeanOperations, claim_all)",
        ),
        (
            "api",
            "the same with the work the API forces per operation: ids checked, a future "
            "per caller, a DurableCall and signal per attempt (ApiOperations)",
        ),
        (
            "bare",
            "least work: bare asyncio + sqlite3, no runtime, syncs on the loop (BareOperations)",
        ),
        ("bare-threaded", "least work: the same bare, syncs in a thread"),
        (
            "least",
            "the least work at all: 2 row writes per op on a 5-column table, registered "
            "already claimed, no task per call, syncs on the loop (LeastWork)",
        ),
        (
            "least-wide",
            f"the same with {args.wide_concurrency or args.alarm_concurrency} permits",
        ),
        (
            "least-all",
            "the same with a turn's registrations all claimed by its commit, as the "
            "engine's (LeastWork, claim_all)",
        ),
        (
            "least-threaded",
            f"the least work at all, syncs in {LEAST_SYNC_THREADS} threads, up to as many "
            "in flight",
        ),
    ):
        rate, text = _rates(args.operations, references[key])
        rows.append((label, f"{args.operations:,}", f"{text}, {rate / raw_rate:.1f}x"))
    least = {
        args.alarm_concurrency: statistics.median(references["least"]),
        args.wide_concurrency: statistics.median(references["least-wide"]),
    }
    least_all = statistics.median(references["least-all"])
    for concurrency, seconds in runtime.items():
        engine = statistics.median(seconds)
        rows.append(
            (
                f"durability, alarm_concurrency={concurrency}, against LeastWork with as many "
                "permits / with a turn's claims in one commit",
                f"{args.operations:,}",
                f"{least[concurrency] / engine:.2f}x / {least_all / engine:.2f}x",
            )
        )
    api = statistics.median(references["api"])
    rows.append(
        (
            f"ApiOperations against LeastWork with {args.alarm_concurrency} permits; "
            f"durability (alarm_concurrency={args.alarm_concurrency}) against ApiOperations",
            f"{args.operations:,}",
            f"{least[args.alarm_concurrency] / api:.2f}x; "
            f"{api / statistics.median(runtime[args.alarm_concurrency]):.2f}x",
        )
    )
    floor_us = statistics.median(cpu["floor"]) * 1e6
    bare_us = statistics.median(cpu["bare"]) * 1e6
    operations_us = statistics.median(cpu["operations"]) * 1e6
    rows.append(
        (
            "in-memory runtime, CPU per call: a stub call inserting one row (the floor)",
            f"{args.operations:,}",
            f"{floor_us:.1f} us",
        )
    )
    rows.append(
        (
            "bare asyncio + sqlite3 in memory, CPU per call: a task inserting one row",
            f"{args.operations:,}",
            f"{bare_us:.1f} us (the runtime's floor adds {floor_us - bare_us:.1f} us)",
        )
    )
    lean_us = statistics.median(cpu["lean-all"]) * 1e6
    rows.append(
        (
            "in-memory runtime, CPU per operation: the least work on this runtime, a turn's "
            "records claimed by its commit (LeanOperations, claim_all)",
            f"{args.operations:,}",
            f"{lean_us:.1f} us ({lean_us - floor_us:.1f} us over the floor)",
        )
    )
    api_us = statistics.median(cpu["api"]) * 1e6
    rows.append(
        (
            "the same with the work the API forces per operation (ApiOperations)",
            f"{args.operations:,}",
            f"{api_us:.1f} us ({api_us - lean_us:+.1f} us)",
        )
    )
    rows.append(
        (
            "in-memory runtime, CPU per operation: register -> completed, alarm_concurrency=10",
            f"{args.operations:,}",
            f"{operations_us:.1f} us ({operations_us - floor_us:.1f} us over the floor)",
        )
    )
    listening_us = statistics.median(cpu["listening"]) * 1e6
    rows.append(
        (
            "the same, completions counted by a lifecycle hook (an attempt_settled event "
            "per operation; ListeningBench)",
            f"{args.operations:,}",
            f"{listening_us:.1f} us ({listening_us - operations_us:+.1f} us)",
        )
    )
    rows.extend(
        (
            f"named alarm schedule, {pending:,} other occurrences pending",
            f"{PROBES:,}",
            f"{seconds / PROBES * 1e6:,.0f} us per schedule",
        )
        for pending, seconds in schedule.items()
    )
    rows.append(
        (
            "near-term named alarm lateness (in-memory timer, real clock)",
            f"{len(lateness):,}",
            f"p50 {statistics.median(lateness):.1f} ms, p99 {_percentile(lateness, 0.99):.1f} ms",
        )
    )
    versions = f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}"
    print(
        f"{versions}, WAL, every commit synced, {platform.machine()}, real clock, "
        f"median of {args.rounds} (range)"
    )
    print()
    print("| benchmark | n | result (x = vs raw, 1 commit per op) |")
    print("|---|---:|---:|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
