"""Many objects: alarm deliveries, creation, fsyncs, memory and start time, vs raw sqlite3.

    python bench/objects.py [--objects 1000] [--live 10000] [--start-objects 100000]
                            [--fsync-objects 200] [--quick] [--dir DIR]

Everything runs on real files (WAL, every commit synced) and the real clock, in one command:

- deliveries: `--objects` file-backed objects each get an alarm due at the same instant;
  each `alarm()` inserts one row and waits for it to be durable (`storage.sync()`). Once
  with the objects live (open), once after a restart (every object hibernated, its alarm
  overdue when the runtime starts). Beside them raw sqlite3 committing one row in each of
  as many already-open files, one after another, and the same from 8 threads; raw
  sqlite3 making the runtime's two commits per delivery (the row with the stored retry,
  then the retry cleared) in each open file from 8 threads; and raw sqlite3 opening each
  closed file and committing one row in it (what a delivery after a restart cannot do
  with less: a new WAL in each file).
- creation: a first call to each new object, which creates a table and sets its alarm,
  vs raw sqlite3 creating the file, its table and one row (before and after the
  runtime's phases, as the disk drifts; compared with the mean).
- fsyncs: the same phases run again in a child process under
  `strace -f -e trace=fsync,fdatasync`; the child marks each phase's start and end with
  an `access()` of a path that cannot exist, so the fsyncs (and fdatasyncs) of SQLite's
  own VFS and of the runtime's directory syncs are counted between the marks, per item.
- memory: RSS (after `malloc_trim`) and tracemalloc deltas per object with `--live`
  objects live (each has a table, one row and an alarm), then after evicting them all;
  beside them the RSS of raw sqlite3 connections (the deliveries' raw files, open).
  These files go to `--memory-dir` (default /dev/shm), only so that creating 10,000
  objects does not wait on 100,000 fsyncs: memory per object does not depend on it.
- start: `Runtime.start()` with `--start-objects` objects on disk (copies of one object
  file, with and without a catalog entry each), and the first call to one of them.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from objects_raw import (
    phase,
    raw_create,
    raw_deliveries,
    raw_memory,
    raw_reopen,
    raw_two_commits,
    settled_memory,
)
from objects_report import BATCH, START_ROUNDS, FsyncCounts, count_fsyncs, report

from durability.runtime import DurableObject, Runtime

FAR_FUTURE_MS = 10 * 365 * 24 * 60 * 60 * 1000


class Tally:
    """Counts delivered alarms; wakes the benchmark when the expected number arrived."""

    def __init__(self) -> None:
        self.count = 0
        self.target = 0
        self.last = 0.0
        self.done = asyncio.Event()

    def expect(self, target: int) -> None:
        self.count = 0
        self.target = target
        self.done = asyncio.Event()

    def add(self) -> None:
        self.count += 1
        self.last = time.time()
        if self.count >= self.target:
            self.done.set()


tally = Tally()


class Tenant(DurableObject):
    """One small object: a table of ticks and one alarm that writes a tick."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS ticks (id INTEGER PRIMARY KEY, at INTEGER NOT NULL)"
        )

    async def arm(self, at_ms: int) -> None:
        """Set the alarm (the first call to a new object creates it)."""
        await self.ctx.storage.set_alarm(at_ms)

    async def touch(self, at_ms: int) -> None:
        """Write one row and set the alarm."""
        self.ctx.storage.sql.exec("INSERT INTO ticks (at) VALUES (?)", at_ms)
        await self.ctx.storage.set_alarm(at_ms)

    async def ping(self) -> int:
        """Nothing: the first call after start opens the object."""
        return 1

    async def alarm(self) -> None:
        """One row per delivery, counted once it is durable."""
        self.ctx.storage.sql.exec("INSERT INTO ticks (at) VALUES (?)", int(time.time() * 1000))
        await self.ctx.storage.sync()
        tally.add()


async def _in_batches(count: int, call: Callable[[int], Any], concurrency: int) -> None:
    """`call(n)` for n in range(count), `concurrency` at a time."""
    for first in range(0, count, concurrency):
        await asyncio.gather(*(call(n) for n in range(first, min(first + concurrency, count))))


async def durability_runs(directory: Path, count: int) -> dict[str, float]:
    """Creation (1 caller, then 100), live deliveries and deliveries after a restart."""
    results: dict[str, float] = {}
    async with Runtime(path=directory, bindings={"T": Tenant}) as rt:
        ns = rt.env.T
        half = count // 2
        with phase("create-1"):
            started = time.perf_counter()
            for number in range(half):
                await ns.get_by_name(f"t{number}").arm(FAR_FUTURE_MS + now_ms())
            results["create-1"] = (time.perf_counter() - started) / half
        with phase("create-100"):
            started = time.perf_counter()
            await _in_batches(
                count - half,
                lambda n: ns.get_by_name(f"t{half + n}").arm(FAR_FUTURE_MS + now_ms()),
                BATCH,
            )
            results["create-100"] = (time.perf_counter() - started) / (count - half)
        per_create = max(results["create-1"], results["create-100"])
        due = await _arm_all(ns, count, per_create)
        with phase("deliver-live"):
            await tally.done.wait()
            results["deliver-live"] = tally.last - due / 1000
            await asyncio.sleep(0.3)
        due = await _arm_all(ns, count, per_create)
    await asyncio.sleep(max(0.0, due / 1000 - time.time()) + 0.1)
    with phase("deliver-restart"):
        started = time.time()
        async with Runtime(path=directory, bindings={"T": Tenant}):
            await tally.done.wait()
            results["deliver-restart"] = tally.last - started
            await asyncio.sleep(0.3)
    return results


async def _arm_all(ns: Any, count: int, per_call: float) -> int:
    """Arm every object for one instant, far enough ahead for the arming to finish."""
    due = now_ms() + int((count * per_call * 1.5 + 1.0) * 1000)
    tally.expect(count)
    await _in_batches(count, lambda n: ns.get_by_name(f"t{n}").arm(due), BATCH)
    if now_ms() >= due:
        raise RuntimeError("arming took longer than its lead: rerun on a quieter machine")
    return due


def now_ms() -> int:
    return int(time.time() * 1000)


async def memory_run(directory: Path, count: int) -> dict[str, float]:
    """Bytes per live object at `count` live objects, and per hibernated object.

    The live cap is raised to `count` (past the default cap, the oldest idle objects
    would be evicted and the figure would be per object touched, not per live one).
    """
    async with Runtime(path=directory, bindings={"T": Tenant}, max_live_objects=count + 1) as rt:
        ns = rt.env.T
        await ns.get_by_name("warm-up").touch(FAR_FUTURE_MS + now_ms())
        tracemalloc.start()
        rss0, traced0 = settled_memory()
        at = FAR_FUTURE_MS + now_ms()
        await _in_batches(count, lambda n: ns.get_by_name(f"m{n}").touch(at), BATCH)
        rss1, traced1 = settled_memory()
        for number in range(count):
            await rt.evict(ns.get_by_name(f"m{number}"))
        rss2, traced2 = settled_memory()
        tracemalloc.stop()
    return {
        # Versions before the open-files cap kept one file open per live object.
        "open-cap": getattr(rt, "max_open_databases", count),
        "live-rss": (rss1 - rss0) / count,
        "live-traced": (traced1 - traced0) / count,
        "hibernated-rss": (rss2 - rss0) / count,
        "hibernated-traced": (traced2 - traced0) / count,
        "total-live-rss": rss1 - rss0,
    }


async def start_run(directory: Path, count: int) -> dict[str, float]:
    """Start time with `count` armed objects on disk (a catalog entry each), after a
    clean close, and after a crash (no clean-close mark: the scan of modified files)."""
    template_dir = directory / "template"
    async with Runtime(path=template_dir, bindings={"T": Tenant}) as rt:
        await rt.env.T.get_by_name("template").touch(FAR_FUTURE_MS + now_ms())
    (template,) = (template_dir / "T").glob("*.sqlite3")
    names = Runtime(bindings={"T": Tenant}).namespace("T")
    path = directory / "objects"
    (path / "T").mkdir(parents=True)
    for number in range(count):
        object_id = names.id_from_name(f"s{number}")
        shutil.copyfile(template, path / "T" / f"{object_id}.sqlite3")
    # Not timed: the first start reads every file into a new catalog.
    async with Runtime(path=path, bindings={"T": Tenant}):
        pass
    results: dict[str, float] = {}
    for crashed in (False, True):
        gc.collect()
        runs: dict[str, list[float]] = {"start": [], "first-call": [], "close": []}
        for _ in range(START_ROUNDS):
            if crashed:
                # What a crash leaves: no mark (versions before it had none at all).
                (path / ".clean").unlink(missing_ok=True)
            rt = Runtime(path=path, bindings={"T": Tenant})
            started = time.perf_counter()
            await rt.start()
            runs["start"].append(time.perf_counter() - started)
            started = time.perf_counter()
            await rt.env.T.get_by_name(f"s{count // 2}").ping()
            runs["first-call"].append(time.perf_counter() - started)
            started = time.perf_counter()
            await rt.close()
            runs["close"].append(time.perf_counter() - started)
        for name, values in runs.items():
            results[f"{name}-{crashed}"] = statistics.median(values)
    return results


def raise_fd_limit(wanted: int) -> int:
    """Raise the open-file limit toward `wanted` (a live object holds 3 files open)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for limit in (max(wanted, hard), hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
            return limit
        except (ValueError, OSError):
            continue
    return soft


def fsync_child(args: argparse.Namespace) -> None:
    """The phases whose fsyncs the parent counts (run under strace)."""
    directory = Path(args.dir)
    _, connections = raw_create(directory / "raw", args.objects)
    raw_deliveries(connections, 1)
    for connection in connections:
        connection.close()
    raw_reopen(directory / "raw", args.objects)
    asyncio.run(durability_runs(directory / "runtime", args.objects))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=1_000, help="objects for deliveries")
    parser.add_argument("--live", type=int, default=10_000, help="live objects for memory")
    parser.add_argument("--start-objects", type=int, default=100_000, help="objects on disk")
    parser.add_argument("--fsync-objects", type=int, default=200, help="objects, fsync count")
    parser.add_argument("--threads", type=int, default=8, help="threads of the raw row")
    parser.add_argument("--quick", action="store_true", help="small sizes: a fast check")
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="a real disk")
    parser.add_argument(
        "--memory-dir",
        type=Path,
        default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None,
        help="where the memory run's objects go (default /dev/shm: fsyncs there are free, "
        "and memory per object does not depend on the disk)",
    )
    parser.add_argument(
        "--phases",
        default="objects,memory,start",
        help="comma-separated: objects (creation, deliveries, fsyncs), memory, start",
    )
    parser.add_argument("--fsync-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fsync_child:
        fsync_child(args)
        return
    if args.quick:
        args.objects, args.live, args.start_objects, args.fsync_objects = 200, 1_000, 10_000, 50
    phases = set(args.phases.split(","))
    fd_limit = raise_fd_limit(3 * args.objects + 1_000)
    results: dict[str, float] = {}
    fsyncs: FsyncCounts | str = "not counted: the objects phase did not run"
    with tempfile.TemporaryDirectory(prefix="durability-objects-", dir=args.dir) as tmp:
        directory = Path(tmp)
        if "objects" in phases:
            fsyncs = objects_phase(args, directory, results)
        if "memory" in phases:
            with tempfile.TemporaryDirectory(prefix="durability-mem-", dir=args.memory_dir) as mem:
                results["raw-rss"] = raw_memory(Path(mem) / "raw", args.objects)
                results.update(asyncio.run(memory_run(Path(mem) / "runtime", args.live)))
            print("memory done", file=sys.stderr)
        if "start" in phases:
            results.update(asyncio.run(start_run(directory / "start", args.start_objects)))
            print("start done", file=sys.stderr)
    report(args, fd_limit, results, fsyncs)


def objects_phase(
    args: argparse.Namespace, directory: Path, results: dict[str, float]
) -> FsyncCounts | str:
    """Raw and durability creation and deliveries into `results`; then count fsyncs."""
    results["raw-create"], connections = raw_create(directory / "raw", args.objects)
    results["raw-commit-1"] = raw_deliveries(connections, 1)
    results["raw-commit-n"] = raw_deliveries(connections, args.threads)
    results["raw-two-commits-n"] = raw_two_commits(connections, args.threads)
    print("raw done", file=sys.stderr)
    results.update(asyncio.run(durability_runs(directory / "runtime", args.objects)))
    results["raw-commit-after"] = raw_deliveries(connections, 1)
    for connection in connections:
        connection.close()
    results["raw-reopen"] = raw_reopen(directory / "raw", args.objects)
    results["raw-create-after"], connections = raw_create(
        directory / "raw-after", args.objects, "raw-create-after"
    )
    for connection in connections:
        connection.close()
    print("deliveries done", file=sys.stderr)
    fsyncs = count_fsyncs(args)
    print("fsync count done", file=sys.stderr)
    return fsyncs


if __name__ == "__main__":
    main()
