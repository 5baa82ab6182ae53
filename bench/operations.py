"""Durable operations and named alarms: throughput, scheduling cost, timer lateness.

    python bench/operations.py [--operations 20000] [--callers 200] [--rounds 3] [--dir DIR]

Everything runs in one process on real files (WAL, every commit synced) and the real clock:

- register -> completed throughput: concurrent callers register no-op operations on
  ONE file-backed object (each call returns once the registration is durable); the
  clock stops when the last one is completed. Beside it, raw sqlite3 doing the same
  row work (insert, claim, complete) with one fsynced commit per operation, the same
  batched 100 operations per commit, and batched `--alarm-concurrency` operations per
  commit (as many as one batch of permits runs: a claim must be committed before its
  handler starts, so that is the most operations one commit can finish). Each is
  measured `--rounds` times (a fresh database each time) and reported as the median
  with the range, because a shared machine's disk and CPU vary a lot between runs.
  The object runs with the default `alarm_concurrency` (10) and, as a second row,
  with `--wide-concurrency` permits, to show how much of the cost is the permit limit.
  Two ceilings with the default permits follow: the same workload with every sync
  left out (`synchronous=OFF`, commits on the loop; not durable, so not something the
  runtime offers, but no way of syncing can beat it), and on the in-memory runtime.
- named-alarm schedule cost with 1,000 vs 100,000 other occurrences pending (those are
  inserted with SQL to set up quickly; the measured calls go through the API).
- CPU per operation on the in-memory runtime (process time, register -> completed,
  default permits), beside the runtime's own floor: a stub call inserting one row.
  The operations object's hook counts completions, so it asks for `attempt_settled`
  events only (`lifecycle_events`): the engine builds no other event.
- lateness of near-term named alarms (due within the min delay, so served by the
  in-memory timer): time the handler starts minus the scheduled time, p50/p99.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from durability import (
    Durability,
    DurabilityAlarms,
    DurableAlarmInfo,
    DurableCall,
    LifecycleEventType,
    now_ms,
)
from durability.runtime import AlarmInvocationInfo, DurableObject, Runtime, _opening
from durability.runtime._opening import connect_file


@dataclass
class Settings:
    """Options the benchmark objects read when they are built."""

    alarm_concurrency: int = 10


settings = Settings()
PROBES = 1_000
TIMERS = 500
FAR_FUTURE_MS = 10 * 365 * 24 * 60 * 60 * 1000


class OperationsBench(DurableObject):
    """No-op durable operations; counts completions to wake the benchmark at the end."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.completed = 0
        self.target = 0
        self.done = asyncio.Event()
        self.durability = Durability(
            context=ctx,
            handlers={"noop": self._noop},
            on_lifecycle_event=self._count,
            lifecycle_events=[LifecycleEventType.ATTEMPT_SETTLED],
            alarm_concurrency=settings.alarm_concurrency,
        )

    def _noop(self, call: DurableCall) -> None:
        return None

    def _count(self, event: Any) -> None:
        if event.type == "attempt_settled" and event.outcome == "completed":
            self.completed += 1
            if self.completed >= self.target:
                self.done.set()

    async def register(self, id: str) -> None:
        """Register one no-op operation; returns once it is durable."""
        await self.durability.noop(id=id)

    async def expect(self, count: int) -> None:
        """Arm the completion counter for `count` operations."""
        self.completed = 0
        self.target = count
        self.done.clear()

    async def wait_completed(self) -> int:
        """Wait until the expected number completed; return the completed rows stored."""
        await self.done.wait()
        rows = self.ctx.storage.sql.exec(
            "SELECT COUNT(*) AS n FROM durability_calls WHERE status = 'completed'"
        )
        return int(rows.one()["n"])

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.durability.alarm(info)


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


def bench_raw(directory: Path, operations: int, per_commit: int) -> float:
    """Seconds for raw sqlite3 to insert, claim and complete `operations` rows."""
    file = directory / f"raw-{per_commit}-{time.monotonic_ns()}.sqlite3"
    connection = sqlite3.connect(file, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        connection.execute(CREATE_CALLS)
        started = time.perf_counter()
        raw_row_work(connection, operations, per_commit)
        elapsed = time.perf_counter() - started
        (done,) = connection.execute(
            "SELECT COUNT(*) FROM calls WHERE status = 'completed'"
        ).fetchone()
        assert done == operations, (done, operations)
        return elapsed
    finally:
        connection.close()


async def bench_operations(
    directory: Path | None,
    operations: int,
    callers: int,
    alarm_concurrency: int,
    clock: Any = None,
) -> float:
    """Seconds from the first registration until all `operations` are completed
    (`directory=None`: on the in-memory runtime)."""
    settings.alarm_concurrency = alarm_concurrency
    async with Runtime(path=directory, bindings={"OPS": OperationsBench}, clock=clock) as rt:
        bench = rt.env.OPS.get_by_name("operations")
        await bench.expect(operations)
        ids = iter(range(operations))

        async def caller() -> None:
            for number in ids:
                await bench.register(f"op-{number}")

        started = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(callers)))
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


async def cpu_per_call(binding: type[DurableObject], operations: int, callers: int) -> float:
    """Process CPU seconds per call of `callers` concurrent callers making `operations`
    `register` calls on one in-memory object (for operations: until all completed)."""
    settings.alarm_concurrency = 10
    async with Runtime(bindings={"OBJ": binding}) as rt:
        bench = rt.env.OBJ.get_by_name("cpu")
        operations_bench = binding is OperationsBench
        if operations_bench:
            await bench.expect(operations)
        ids = iter(range(operations))

        async def caller() -> None:
            for number in ids:
                await bench.register(f"op-{number}")

        started = time.process_time()
        await asyncio.gather(*(caller() for _ in range(callers)))
        if operations_bench:
            assert await bench.wait_completed() == operations
        return (time.process_time() - started) / operations


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
        "--raw-operations", type=int, default=2_000, help="raw sqlite3 ops, 1 commit each"
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
    runtime: dict[int, list[float]] = {concurrency: [] for concurrency in concurrencies}
    cpu: dict[str, list[float]] = {"operations": [], "floor": []}
    ceilings: dict[str, list[float]] = {"unsynced": [], "memory": []}
    with tempfile.TemporaryDirectory(prefix="durability-bench-", dir=args.dir) as tmp:
        directory = Path(tmp)
        for round_number in range(args.rounds):
            here = directory / f"round-{round_number}"
            here.mkdir()
            raw_one.append(bench_raw(here, args.raw_operations, 1))
            raw_batched.append(bench_raw(here, args.operations, 100))
            raw_permits.append(bench_raw(here, args.operations, args.alarm_concurrency))
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
            ceilings["unsynced"].append(
                asyncio.run(bench_unsynced(here / "unsynced", args.operations, args.callers))
            )
            ceilings["memory"].append(
                asyncio.run(bench_operations(None, args.operations, args.callers, 10))
            )
            cpu["floor"].append(
                asyncio.run(cpu_per_call(InsertFloor, args.operations, args.callers))
            )
            cpu["operations"].append(
                asyncio.run(cpu_per_call(OperationsBench, args.operations, args.callers))
            )
            print(f"round {round_number + 1} of {args.rounds} done", file=sys.stderr)
        schedule = {n: asyncio.run(bench_schedule(directory, n)) for n in (1_000, 100_000)}
        print("schedule cost done", file=sys.stderr)
        lateness = asyncio.run(bench_lateness(directory))

    raw_rate, raw_text = _rates(args.raw_operations, raw_one)
    batched_rate, batched_text = _rates(args.operations, raw_batched)
    permits_rate, permits_text = _rates(args.operations, raw_permits)
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
    ]
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
        ("memory", "ceiling: the same on the in-memory runtime (no disk at all)"),
    ):
        rate, text = _rates(args.operations, ceilings[key])
        rows.append((label, f"{args.operations:,}", f"{text}, {rate / raw_rate:.1f}x"))
    floor_us = statistics.median(cpu["floor"]) * 1e6
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
            "in-memory runtime, CPU per operation: register -> completed, alarm_concurrency=10",
            f"{args.operations:,}",
            f"{operations_us:.1f} us ({operations_us - floor_us:.1f} us over the floor)",
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
