"""One caller at a time on one file-backed object, against raw sqlite3 per-step commits.

    python bench/one_caller.py [--operations 2000] [--rounds 3] [--dir DIR]

The most common shape of a request: one caller registers one durable operation and
waits for the answer before the next. Rows, each measured `--rounds` times in one run
(real files, WAL, every commit synced, real clock), median and range:

- raw sqlite3 doing an operation's row work (insert, claim, complete) in one fsynced
  commit per operation (bench/operations.py's per-step row);
- raw sqlite3 with one caller's commits as the engine makes them: the record inserted
  claimed in one synced commit, its completion in a second one, in series (the floor of
  both durability rows: a claim is durable before its handler starts, and the engine
  writes a success in a commit of its own);
- raw sqlite3 with each completion written in the next registration's commit instead
  (one synced commit per operation, the last completion alone): what a single caller
  could reach if a success waited for the next write;
- the runtime's floor for one caller: a stub call whose method inserts the record
  claimed, waits until that is durable (`storage.sync()`), marks it completed and
  returns (its reply released once that is durable too): the two syncs in series that
  register-and-await forces, through this runtime, with no engine;
- the same floor with what register-and-await cannot skip beyond it: the object's
  alarm armed with the record (the fallback that resumes claimed work after a crash:
  the scheduler arms it while work is pending) and cleared with its completion (nothing
  is pending then), and the record read once by the wait before it waits;
- durability, register only: the caller awaits each registration (returned once
  durable), as a queue's producer enqueues; the clock stops once every operation is
  completed and durable;
- durability, register and await the result: each call registers an operation and
  waits for its result (`job.wait()`) inside the object, so the caller's answer is
  released only once the completion is durable. A claim must be durable before its
  handler starts and a completion before it is acknowledged, so each such call needs
  two syncs in series: 0.5x raw per-step is its ceiling.

Beside each rate, the CPU per operation (process time of every thread over the timed
span; a raw row's includes creating its file, a fraction of a millisecond): with the
syncs' waits alike, a row reaches 0.5x raw per-step only if it spends at most twice raw
per-step's CPU per operation (the register-only row is timed by bench/operations.py,
without it).
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from least_work import register_all
from operations import (
    CREATE_CALLS,
    OperationsBench,
    _timed_raw,
    bench_operations,
    bench_raw,
)

from durability.runtime import DurableObject, Runtime


class RuntimeFloor(DurableObject):
    """One caller's two synced commits through the runtime, with no engine at all."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec(CREATE_CALLS)

    async def call(self, id: str) -> None:
        """Insert `id` claimed, wait until durable, complete it (durable once returned)."""
        sql = self.ctx.storage.sql
        sql.exec(_INSERT_CLAIMED, id, 0)
        await self.ctx.storage.sync()
        sql.exec(_COMPLETE, 1, id)


class ForcedWork(RuntimeFloor):
    """`RuntimeFloor` with the writes and the read register-and-await forces beyond it."""

    async def call(self, id: str) -> None:
        """Insert `id` claimed with the alarm armed; once durable, read it (as the wait
        does), complete it and clear the alarm (durable once returned)."""
        storage = self.ctx.storage
        sql = storage.sql
        sql.exec(_INSERT_CLAIMED, id, 0)
        await storage.set_alarm(time.time_ns() // 1_000_000 + FALLBACK_DELAY_MS)
        await storage.sync()
        sql.exec(_READ, id).one()
        sql.exec(_COMPLETE, 1, id)
        await storage.delete_alarm()


FALLBACK_DELAY_MS = 15_000
"""How far ahead the model arms its alarm: the scheduler's default minimum delay."""


Timing = tuple[float, float | None]
"""A row's seconds and, when measured, the process CPU seconds of the same span."""


async def bench_runtime_floor(
    directory: Path, operations: int, binding: type[RuntimeFloor] = RuntimeFloor
) -> Timing:
    """Seconds (and CPU seconds) for one caller to make `operations` calls of `binding`
    (`RuntimeFloor` or `ForcedWork`) in series."""
    async with Runtime(path=directory, bindings={"FLOOR": binding}) as rt:
        floor: Any = rt.env.FLOOR.get_by_name("floor")
        await floor.call("warm-up")
        started, cpu = time.perf_counter(), time.process_time()
        await register_all(floor.call, operations, 1)
        return time.perf_counter() - started, time.process_time() - cpu


class AwaitingBench(OperationsBench):
    """`OperationsBench` whose calls also wait for their operation's result."""

    async def call(self, id: str) -> None:
        """Register one no-op operation and wait until it completed."""
        await self.durability.noop(id=id)
        result = await self.durability.noop.job(id).wait()
        if result.status != "completed":
            raise RuntimeError(f"{id} ended {result.status}")


async def bench_awaiting(directory: Path, operations: int) -> Timing:
    """Seconds (and CPU seconds) for one caller to register `operations` no-ops, awaiting
    each result."""
    async with Runtime(path=directory, bindings={"OPS": AwaitingBench}) as rt:
        bench: Any = rt.env.OPS.get_by_name("operations")
        await bench.expect(operations)
        started, cpu = time.perf_counter(), time.process_time()
        await register_all(bench.call, operations, 1)
        elapsed = time.perf_counter() - started, time.process_time() - cpu
        assert await bench.wait_completed() == operations
        return elapsed


def with_cpu(run: Callable[[], float]) -> Timing:
    """`run()`'s seconds, and the process CPU seconds of the whole call (setting up a raw
    file costs a fraction of a millisecond)."""
    cpu = time.process_time()
    seconds = run()
    return seconds, time.process_time() - cpu


_INSERT_CLAIMED = (
    "INSERT INTO calls (id, operation, payload, status, attempt, next_attempt_at) "
    "VALUES (?, 'noop', '{\"kind\":\"value\",\"value\":null}', 'pending', 1, ?)"
)
_READ = "SELECT id, status, result, attempt FROM calls WHERE id = ?"
_COMPLETE = (
    "UPDATE calls SET status = 'completed', result = 'null', completed_at = ? "
    "WHERE id = ? AND status = 'pending' AND attempt = 1"
)


def one_caller_row_work(connection: sqlite3.Connection, operations: int, *, ride: bool) -> None:
    """One caller's row work: each record inserted claimed in a commit of its own; its
    completion in a second commit (`ride` False) or in the next record's commit."""
    execute = connection.execute
    for number in range(operations):
        execute("BEGIN IMMEDIATE")
        if ride and number:
            execute(_COMPLETE, (number, f"op-{number - 1}"))
        execute(_INSERT_CLAIMED, (f"op-{number}", number))
        execute("COMMIT")
        if not ride:
            execute("BEGIN IMMEDIATE")
            execute(_COMPLETE, (number, f"op-{number}"))
            execute("COMMIT")
    if ride and operations:
        execute(_COMPLETE, (operations, f"op-{operations - 1}"))


def bench_raw_one_caller(directory: Path, operations: int, *, ride: bool) -> float:
    """Seconds for `one_caller_row_work` on a new synced WAL file."""
    return _timed_raw(
        directory / f"raw-one-caller-{ride}.sqlite3",
        [CREATE_CALLS],
        "calls",
        operations,
        lambda connection: one_caller_row_work(connection, operations, ride=ride),
    )


def _rate(count: int, timings: list[Timing]) -> tuple[float, str]:
    rates = sorted(count / seconds for seconds, _ in timings)
    median = statistics.median(rates)
    return median, f"{median:,.0f} ops/s ({rates[0]:,.0f} to {rates[-1]:,.0f})"


def _cpu(count: int, timings: list[Timing]) -> str:
    """The median CPU per operation in microseconds, or a dash when not measured."""
    spent = [cpu for _, cpu in timings if cpu is not None]
    return f"{1e6 * statistics.median(spent) / count:,.0f}" if spent else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--operations", type=int, default=2_000, help="operations per row")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each row")
    parser.add_argument(
        "--dir", type=Path, default=Path.cwd(), help="where the databases go (a real disk)"
    )
    args = parser.parse_args()
    rows: dict[str, list[Timing]] = {
        "raw": [],
        "raw-two": [],
        "raw-ride": [],
        "floor": [],
        "forced": [],
        "register": [],
        "await": [],
    }
    with tempfile.TemporaryDirectory(prefix="durability-bench-", dir=args.dir) as tmp:
        for round_number in range(args.rounds):
            here = Path(tmp) / f"round-{round_number}"
            here.mkdir()
            n = args.operations
            rows["raw"].append(with_cpu(partial(bench_raw, here, n, 1)))
            rows["raw-two"].append(with_cpu(partial(bench_raw_one_caller, here, n, ride=False)))
            rows["raw-ride"].append(with_cpu(partial(bench_raw_one_caller, here, n, ride=True)))
            rows["floor"].append(asyncio.run(bench_runtime_floor(here / "floor", n)))
            rows["forced"].append(asyncio.run(bench_runtime_floor(here / "forced", n, ForcedWork)))
            registered = asyncio.run(bench_operations(here / "register", n, 1, 10))
            rows["register"].append((registered, None))
            rows["await"].append(asyncio.run(bench_awaiting(here / "await", n)))
            print(f"round {round_number + 1} of {args.rounds} done", file=sys.stderr)
    raw_rate, raw_text = _rate(args.operations, rows["raw"])
    versions = f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}"
    print(f"{versions}, WAL, every commit synced, real clock, median of {args.rounds} (range)")
    print()
    print("| one caller | n | result (x = vs raw, 1 commit per op) | CPU us/op |")
    print("|---|---:|---:|---:|")
    print(
        f"| raw sqlite3: insert, claim, complete; 1 commit per op | {args.operations:,} | "
        f"{raw_text} | {_cpu(args.operations, rows['raw'])} |"
    )
    for key, label in (
        ("raw-two", "raw sqlite3: inserted claimed, then completed; 2 commits per op in series"),
        ("raw-ride", "raw sqlite3: each completion in the next insert's commit; 1 commit per op"),
        ("floor", "the runtime's floor: one call, claimed row durable, then completed durable"),
        ("forced", "the runtime's floor with the alarm armed and cleared, the record read"),
        ("register", "durability: register only (each registration durable), until completed"),
        ("await", "durability: register and await the result (completion durable)"),
    ):
        rate, text = _rate(args.operations, rows[key])
        cpu = _cpu(args.operations, rows[key])
        print(f"| {label} | {args.operations:,} | {text}, {rate / raw_rate:.2f}x | {cpu} |")


if __name__ == "__main__":
    main()
