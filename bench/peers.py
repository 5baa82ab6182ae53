"""The same durable task workload on durability and on peer libraries, in one run.

    pip install -e '.[bench]' -c constraints/dev.txt
    python bench/peers.py [--tasks 2000] [--delayed 2000] [--quick] [--fsyncs] [--dir DIR]

Immediate work: N no-op tasks are enqueued by the system's producer(s) (one, or several
concurrent ones where a row says so) and run by its own worker(s); the clock runs from
the first enqueue until the last task is completed and its completion is durable
(acknowledged = fsynced). Delayed work: N tasks each due 1 s after it was enqueued; its
rate is taken from the first task's due time to the last acknowledged completion (the
1 s wait would otherwise cap every system at about N per second), and the table shows
how late each task ran. Every system runs in a subprocess of its own (threads, event
loops and signal handlers stay apart), on SQLite files on the same disk, configured for
its durable mode (see the notes the table prints). `--fsyncs` counts each system's
fsyncs in a second run under strace. A peer that is not installed is left out, with the
reason printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from peer_systems import child

IMMEDIATE = (
    "durability-1",
    "durability-8",
    "durability-100",
    "durability-wide",
    "huey",
    "huey-8",
    "huey-results",
    "persist-queue",
    "litequeue",
    "dbos",
    "dbos-wal",
)
DELAYED = ("durability-1", "durability-100", "durability-wide", "huey", "huey-8", "apscheduler")
LABELS = {
    "durability-1": "durability, 1 caller",
    "durability-8": "durability, 8 callers",
    "durability-100": "durability, 100 callers",
    "durability-wide": "durability, 100 callers, 100 permits",
    "huey": "Huey (SqliteHuey), 1 producer",
    "huey-8": "Huey, 8 producer threads",
    "huey-results": "Huey with results, 1 producer",
    "persist-queue": "persist-queue (SQLiteAckQueue)",
    "litequeue": "litequeue (synchronous=FULL)",
    "dbos": "DBOS (SQLite)",
    "dbos-wal": "DBOS (SQLite, WAL), a step per workflow",
    "apscheduler": "APScheduler (SQLAlchemyJobStore)",
}

NOTES = {
    "durability-1": "durability: Durability operations (a no-op handler) on one file-backed "
    "object of the embedded Runtime (WAL, every commit synced), default alarm_concurrency=10; "
    "each caller (an asyncio task) awaits its registration (returned once durable) before "
    "the next; done when a final call's result (released only after every earlier commit) "
    "counts every completed row. Delayed: the same operations with delay_ms=1000",
    "durability-8": "durability, 8 callers: the same with 8 concurrent callers (as Huey's 8 "
    "producer threads); their registrations share commits",
    "durability-100": "durability, 100 callers: the same with 100 concurrent callers",
    "durability-wide": "durability, 100 callers, 100 permits: the same with "
    "alarm_concurrency=100 (handlers running at once; Huey's consumer runs 4 workers; a claim "
    "must be durable before its handler starts, so the permits bound how many tasks "
    "one commit can start)",
    "huey": "Huey: SqliteHuey(fsync=True, journal_mode='wal') = WAL + synchronous=FULL; "
    "consumer with 4 worker threads, polling 10 ms to 100 ms (defaults 0.1 s to 10 s); "
    "a task is acknowledged by its dequeue's committed DELETE (Huey removes it before "
    "running it); delayed: task.schedule(delay=1), moved to the queue by the consumer's "
    "scheduler, which looks once a second (its shortest interval)",
    "huey-8": "Huey, 8 producer threads: the same, enqueueing from 8 threads at once "
    "(SQLite takes one writer at a time; each enqueue is its own commit)",
    "huey-results": "Huey with results: the same as Huey with 1 producer, with results=True "
    "(each task's return value stored in the result store, a commit of its own; a durable "
    "operation's result is stored too)",
    "persist-queue": "persist-queue: SQLiteAckQueue (WAL, SQLite's default synchronous=FULL), "
    "JSON serializer, auto_commit; one producer; one consumer thread: get() (marks unacked, "
    "a commit), ack(id) (a commit)",
    "litequeue": "litequeue: LiteQueue on one file (WAL; its default synchronous=NORMAL does "
    "not sync each commit, so both connections are set to FULL); one producer put()s, one "
    "consumer thread on its own connection pop()s (a commit) and marks done (a commit)",
    "dbos": "DBOS: SQLite system database (SQLAlchemy, rollback journal, synchronous=FULL "
    "by default); one producer enqueues a no-op workflow on a Queue polled every 10 ms "
    "(default 1 s); done when every handle's get_result() returned",
    "dbos-wal": "DBOS with WAL: the same with the system database in WAL mode (set in the file "
    "before DBOS opens it; synchronous=FULL syncs each commit's log), each workflow running "
    "one no-op step (its output recorded, as a durable operation's result is)",
    "apscheduler": "APScheduler 3: BackgroundScheduler, SQLAlchemyJobStore on SQLite "
    "(rollback journal, synchronous=FULL), one producer, 10 worker threads, "
    "misfire_grace_time=None (no job skipped for lateness); date jobs at now + 1 s; "
    "acknowledged when the store is empty (a run date job is deleted)",
}


def run_child(name: str, mode: str, tasks: int, directory: Path, fsyncs: bool) -> dict[str, Any]:
    """Run one system in a subprocess; its result, or the reason it could not run.

    With `fsyncs`, a second run of the same size under `strace -f -c` counts the process's
    fsync and fdatasync calls (start-up included); the rates come from the first run.
    """
    directory.mkdir(exist_ok=True)
    command = [sys.executable, __file__, "--child", name, "--mode", mode, "--tasks", str(tasks)]
    result = _child_run(command, directory / f"{name}-{mode}")
    strace = shutil.which("strace")
    if fsyncs and "error" not in result and strace is not None:
        summary = directory / f"{name}-{mode}.strace"
        traced = [strace, "-f", "-qq", "-c", "-e", "trace=fsync,fdatasync", "-o", str(summary)]
        if "error" not in _child_run(traced + command, directory / f"{name}-{mode}-traced"):
            result["fsyncs"] = _strace_calls(summary.read_text())
    return result


def _child_run(command: list[str], here: Path) -> dict[str, Any]:
    here.mkdir()
    done = subprocess.run([*command, "--dir", str(here)], capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _strace_calls(summary: str) -> int:
    """The calls column of the `total` line of an `strace -c` summary."""
    for line in summary.splitlines():
        fields = line.split()
        if fields and fields[-1] == "total":
            return int(fields[3])
    return 0


def raw_commit_us(directory: Path, commits: int = 500) -> float:
    """Microseconds per raw sqlite3 commit of one row (WAL, synchronous=FULL): the disk's floor."""
    connection = sqlite3.connect(directory / "raw.sqlite3", isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    connection.execute("CREATE TABLE tasks (id INTEGER PRIMARY KEY, body TEXT)")
    started = time.perf_counter()
    for _ in range(commits):
        connection.execute("INSERT INTO tasks (body) VALUES ('{}')")
    seconds = time.perf_counter() - started
    connection.close()
    return seconds / commits * 1e6


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--tasks", type=_count, default=2_000, help="immediate tasks (0: skip that workload)"
    )
    parser.add_argument(
        "--delayed", type=_count, default=2_000, help="delayed tasks (0: skip that workload)"
    )
    parser.add_argument("--quick", action="store_true", help="200 tasks of each kind")
    parser.add_argument("--fsyncs", action="store_true", help="count fsyncs (strace)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each; median shown")
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="a real disk")
    parser.add_argument("--only", default="", help="comma-separated systems to run")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="immediate", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        try:
            result = child(args.child, args.mode, args.tasks, args.dir)
        except ImportError as error:
            result = {"error": f"not installed ({error.name}): pip install -e '.[bench]'"}
        print(json.dumps(result))
        return
    if args.quick:
        args.tasks, args.delayed = min(args.tasks, 200), min(args.delayed, 200)
    only = set(filter(None, args.only.split(",")))
    if unknown := only - set(IMMEDIATE) - set(DELAYED):
        parser.error(
            f"--only: unknown {', '.join(sorted(unknown))}; choose from {', '.join(LABELS)}"
        )
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    raw: list[float] = []
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="durability-peers-", dir=args.dir) as tmp:
        for round_ in range(args.rounds):
            here = Path(tmp) / f"round{round_}"
            here.mkdir()
            raw.append(raw_commit_us(here))
            for mode, names, tasks in (
                ("immediate", IMMEDIATE, args.tasks),
                ("delayed", DELAYED, args.delayed),
            ):
                for name in names if tasks else ():
                    if only and name not in only:
                        continue
                    result = run_child(name, mode, tasks, here, args.fsyncs and round_ == 0)
                    runs.setdefault((name, mode), []).append(result)
                    print(f"round {round_ + 1}: {name} {mode} done", file=sys.stderr)
    results = {key: _median_run(key, found, args) for key, found in runs.items()}
    report(args, results, (load, os.getloadavg()[0]), statistics.median(raw))


def _count(text: str) -> int:
    """A task count for argparse: an integer >= 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _median_run(
    key: tuple[str, str], found: list[dict[str, Any]], args: argparse.Namespace
) -> dict[str, Any]:
    """The run with the median rate (its CPU and lateness too), with every run's rate."""
    if any("error" in result for result in found):
        return next(result for result in found if "error" in result)
    tasks = args.tasks if key[1] == "immediate" else args.delayed
    ordered = sorted(found, key=lambda result: _rate(result, tasks))
    median = dict(ordered[(len(ordered) - 1) // 2])
    median["rates"] = [_rate(result, tasks) for result in ordered]
    if "fsyncs" in found[0]:
        median["fsyncs"] = found[0]["fsyncs"]
    return median


def _rate(result: dict[str, Any], tasks: int) -> float:
    """Tasks per second: from the first enqueue, or (delayed work) from the first due time."""
    start: float = result["first_due"] or 0.0
    seconds: float = result["seconds"]
    return tasks / (seconds - start)


def _best(
    results: dict[tuple[str, str], dict[str, Any]], mode: str, system: str, tasks: int
) -> tuple[float, str] | None:
    rates = [
        (_rate(result, tasks), name)
        for (name, result_mode), result in results.items()
        if result_mode == mode and name.startswith(system) and "error" not in result
    ]
    return max(rates, default=None)


def report(
    args: argparse.Namespace,
    results: dict[tuple[str, str], dict[str, Any]],
    load: tuple[float, float],
    raw_us: float,
) -> None:
    """The table (rates and ratios), then how each system was configured."""
    versions = f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}"
    print(
        f"{versions}, {platform.machine()}, {os.cpu_count()} CPUs, load average "
        f"{load[0]:.1f} before / {load[1]:.1f} after, {args.rounds} rounds (median, range), "
        "each system in its own process"
    )
    print()
    print(
        "| workload | system | tasks | tasks/s | best durability vs this | enqueued/s "
        "| CPU per task | fsyncs per task | late p50 / p99 |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for mode, tasks in (("immediate", args.tasks), ("delayed", args.delayed)):
        best = _best(results, mode, "durability", tasks)
        label = "due in 1 s" if mode == "delayed" else "immediate"
        for (name, result_mode), result in results.items():
            if result_mode != mode:
                continue
            if "error" in result:
                print(f"| {label} | {LABELS[name]} | {tasks:,} | left out: {result['error']} |||||")
                continue
            rate = _rate(result, tasks)
            ratio = f"{best[0] / rate:.1f}x" if best else ""
            late = result["lateness"]
            late_text = (
                f"{statistics.median(late):,.0f} / {_percentile(late, 0.99):,.0f} ms"
                if late
                else ""
            )
            fsyncs = f"{result['fsyncs'] / tasks:.2f}" if "fsyncs" in result else ""
            spread = result["rates"]
            if len(spread) > 1:
                rate_text = f"{rate:,.0f} ({spread[0]:,.0f} to {spread[-1]:,.0f})"
            else:
                rate_text = f"{rate:,.0f}"
            print(
                f"| {label} | {LABELS[name]} | {tasks:,} | {rate_text} | {ratio} "
                f"| {tasks / result['enqueue']:,.0f} | {result['cpu'] / tasks * 1e6:,.0f} us "
                f"| {fsyncs} | {late_text} |"
            )
    print()
    print(
        f"raw sqlite3 in the same run (median of one measurement per round): one commit of "
        f"one row (WAL, synchronous=FULL) takes "
        f"{raw_us:,.0f} us; a task that needs 2 commits one after the other costs at least "
        "twice that"
    )
    for mode in ("immediate", "delayed"):
        tasks = args.tasks if mode == "immediate" else args.delayed
        ours, theirs = (
            _best(results, mode, "durability", tasks),
            _best(results, mode, "huey", tasks),
        )
        if ours and theirs:
            print(
                f"{mode}: best durability ({LABELS[ours[1]]}, {ours[0]:,.0f}/s) is "
                f"{ours[0] / theirs[0]:.1f}x best Huey ({LABELS[theirs[1]]}, {theirs[0]:,.0f}/s)"
            )
        default = _best(results, mode, "durability-100", tasks)
        if default and theirs:
            print(
                f"{mode}: durability with the default permits ({LABELS[default[1]]}, "
                f"{default[0]:,.0f}/s) is {default[0] / theirs[0]:.1f}x best Huey"
            )
    print()
    print("How each system is configured (all on SQLite files on the same disk):")
    print()
    for name, note in NOTES.items():
        if any(key[0] == name for key in results):
            print(f"- {note}")
    print(
        "- tasks/s: immediate work, tasks over the time from the first enqueue to the last "
        "acknowledged completion; delayed work, tasks over the time from the first task's due "
        "time (1 s after the first enqueue) to the last acknowledged completion, so the 1 s "
        "wait is not in it. enqueued/s: tasks over the time until the last enqueue returned. "
        "CPU per task: the process's CPU time (all threads) over the run, per task. fsyncs "
        "per task: fsync + fdatasync calls of a second run under strace (start-up included). "
        "late: when the task ran minus when it was due"
    )


if __name__ == "__main__":
    main()
