"""The same durable task workload on durability and on peer libraries, in one run.

    pip install -e '.[bench]' -c constraints/dev.txt
    python bench/peers.py [--tasks 1000] [--delayed 500] [--quick] [--dir DIR]

Immediate work: N no-op tasks are enqueued one after another by one producer and run by
the system's own worker(s); the clock runs from the first enqueue until the last task
is completed and its completion is durable (acknowledged = fsynced). Delayed work: N
tasks each due 1 s after it was enqueued; the table shows how late each one ran and the
end-to-end rate. Every system runs in a subprocess of its own (threads, event loops and
signal handlers stay apart), on SQLite files on the same disk, configured for its
durable mode (see the notes the table prints). A peer that is not installed is left
out, with the reason printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

IMMEDIATE = ("durability-1", "durability-100", "huey", "huey-8", "persist-queue", "dbos")
DELAYED = ("durability-1", "durability-100", "huey", "apscheduler")
CALLERS = 100
HUEY_PRODUCERS = 8
LABELS = {
    "durability-1": "durability, 1 caller",
    "durability-100": f"durability, {CALLERS} callers",
    "huey": "Huey (SqliteHuey)",
    "huey-8": f"Huey, {HUEY_PRODUCERS} producer threads",
    "persist-queue": "persist-queue (SQLiteAckQueue)",
    "dbos": "DBOS (SQLite)",
    "apscheduler": "APScheduler (SQLAlchemyJobStore)",
}

NOTES = {
    "durability-1": "durability: Durability operations on one file-backed object, embedded "
    "Runtime (WAL, synchronous=FULL), default alarm_concurrency=10; one caller awaits each "
    "registration (returned once durable); done when a final call's result (released only "
    "after every earlier commit) confirms all completed rows",
    "durability-100": f"durability: the same, {CALLERS} concurrent callers (asyncio tasks) "
    "share registration commits; delayed tasks: one DurabilityAlarms name each, scheduled "
    "at now + 1 s (served by the in-memory timer; operations take no delay yet)",
    "huey": "Huey: SqliteHuey(fsync=True, journal_mode='wal') = WAL + synchronous=FULL; "
    "consumer with 4 worker threads, polling 10 ms to 100 ms (defaults 0.1 s to 10 s); "
    "a task is acknowledged by its dequeue's committed DELETE (Huey removes it before "
    "running it); delayed tasks: task.schedule(delay=1), moved by the scheduler each 1 s",
    "huey-8": f"Huey, {HUEY_PRODUCERS} producer threads: the same, enqueueing concurrently "
    "(SQLite still takes one writer at a time, each enqueue its own commit)",
    "persist-queue": "persist-queue: SQLiteAckQueue (WAL, SQLite's default synchronous=FULL), "
    "JSON serializer, auto_commit; one consumer thread: get() (marks unacked, commit), "
    "ack(id) (commit)",
    "dbos": "DBOS: SQLite system database (SQLAlchemy, rollback journal, synchronous=FULL "
    "by default); a no-op workflow enqueued on a Queue (polling 10 ms, default 1 s); done "
    "when every handle's get_result() returned",
    "apscheduler": "APScheduler 3: BackgroundScheduler, SQLAlchemyJobStore on SQLite "
    "(rollback journal, synchronous=FULL), 10 worker threads, misfire_grace_time=None (no "
    "skipped jobs); date jobs at now + 1 s; acknowledged when the store is empty (a run "
    "date job is deleted)",
}


class Done:
    """Thread-safe completion counter with the lateness of each task, in ms."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.count = 0
        self.lateness: list[float] = []
        self.lock = threading.Lock()
        self.event = threading.Event()

    def add(self, due: float | None = None) -> None:
        with self.lock:
            self.count += 1
            if due is not None:
                self.lateness.append((time.time() - due) * 1000)
            if self.count >= self.target:
                self.event.set()

    def wait(self) -> None:
        if not self.event.wait(600):
            raise RuntimeError(f"only {self.count} of {self.target} tasks completed in 600 s")


def run_durability(directory: Path, tasks: int, callers: int, delayed: bool) -> dict[str, Any]:
    """No-op durable operations (or named alarms due in 1 s) on one file-backed object."""
    from durability import Durability, DurabilityAlarms, DurabilityScheduler, DurableAlarmInfo
    from durability.runtime import DurableObject, Runtime

    done = Done(tasks)
    names = [f"t{number}" for number in range(tasks)]

    class Worker(DurableObject):
        def __init__(self, ctx: Any, env: Any) -> None:
            super().__init__(ctx, env)
            self.scheduler = DurabilityScheduler(context=ctx)
            self.durability = Durability(scheduler=self.scheduler, handlers={"noop": self.noop})
            handlers: dict[str, Callable[[DurableAlarmInfo], None]] = dict.fromkeys(
                names, self.fire
            )
            self.alarms = DurabilityAlarms(scheduler=self.scheduler, handlers=handlers)

        def noop(self, call: Any) -> None:
            done.add(call.payload)

        def fire(self, info: DurableAlarmInfo) -> None:
            done.add(info.scheduled_time / 1000)

        async def register(self, number: int) -> None:
            await self.durability.noop(id=f"op-{number}", payload=None)

        async def schedule(self, number: int) -> None:
            await self.alarms.named(names[number])(int(time.time() * 1000) + 1000)

        async def completed(self) -> int:
            rows = self.ctx.storage.sql.exec(
                "SELECT COUNT(*) AS n FROM durability_calls WHERE status = 'completed'"
            )
            return int(rows.one()["n"])

        async def alarm(self, info: Any = None) -> None:
            await self.scheduler.alarm(info)

    async def main() -> float:
        async with Runtime(path=directory, bindings={"W": Worker}) as rt:
            stub = rt.env.W.get_by_name("worker")
            await stub.completed()
            numbers = iter(range(tasks))
            call = stub.schedule if delayed else stub.register

            async def caller() -> None:
                for number in numbers:
                    await call(number)

            started = time.perf_counter()
            await asyncio.gather(*(caller() for _ in range(callers)))
            enqueued.append(time.perf_counter() - started)
            await asyncio.to_thread(done.wait)
            # This call's result is released only after every earlier commit is durable.
            completed = await stub.completed()
            assert delayed or completed == tasks, (completed, tasks)
            return time.perf_counter() - started

    enqueued: list[float] = []
    seconds = asyncio.run(main())
    return {"seconds": seconds, "enqueue": enqueued[0], "lateness": done.lateness}


def run_huey(directory: Path, tasks: int, delayed: bool, producers: int) -> dict[str, Any]:
    """SqliteHuey with its consumer's worker threads in this process."""
    from huey import SqliteHuey

    huey = SqliteHuey(
        "bench", filename=str(directory / "huey.db"), fsync=True, journal_mode="wal", results=False
    )
    done = Done(tasks)

    @huey.task()
    def noop(due: float | None) -> None:
        done.add(due)

    consumer = huey.create_consumer(
        workers=4,
        worker_type="thread",
        periodic=False,
        initial_delay=0.01,
        max_delay=0.1,
        check_worker_health=False,
    )
    consumer.start()

    def produce(count: int) -> None:
        for _ in range(count):
            if delayed:
                noop.schedule(args=(time.time() + 1,), delay=1)
            else:
                noop(None)

    threads = [
        threading.Thread(target=produce, args=(tasks // producers + (n < tasks % producers),))
        for n in range(producers)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    enqueued = time.perf_counter() - started
    done.wait()
    seconds = time.perf_counter() - started
    consumer.stop(graceful=True)
    return {"seconds": seconds, "enqueue": enqueued, "lateness": done.lateness}


def run_persist_queue(directory: Path, tasks: int) -> dict[str, Any]:
    """SQLiteAckQueue: this thread puts, one consumer thread gets and acks."""
    from persistqueue import SQLiteAckQueue
    from persistqueue.serializers import json as json_serializer

    queue = SQLiteAckQueue(
        str(directory / "pq"), multithreading=True, serializer=json_serializer, auto_commit=True
    )
    done = Done(tasks)

    def consume() -> None:
        for _ in range(tasks):
            item = queue.get(block=True, raw=True)
            queue.ack(id=item["pqid"])
            done.add()

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    started = time.perf_counter()
    for number in range(tasks):
        queue.put({"task": number})
    enqueued = time.perf_counter() - started
    done.wait()
    seconds = time.perf_counter() - started
    assert queue.acked_count() == tasks, (queue.acked_count(), tasks)
    return {"seconds": seconds, "enqueue": enqueued, "lateness": []}


def run_dbos(directory: Path, tasks: int) -> dict[str, Any]:
    """No-op DBOS workflows enqueued on a queue, SQLite system database."""
    import logging

    from dbos import DBOS

    logging.getLogger("dbos").setLevel(logging.WARNING)
    DBOS(
        config={
            "name": "bench",
            "system_database_url": f"sqlite:///{directory / 'dbos.sqlite'}",
            "log_level": "WARNING",
        }
    )

    @DBOS.workflow()
    def noop(number: int) -> int:
        return number

    DBOS.launch()
    try:
        queue = DBOS.register_queue("bench", polling_interval_sec=0.01)
        started = time.perf_counter()
        handles = [queue.enqueue(noop, number) for number in range(tasks)]
        enqueued = time.perf_counter() - started
        results = [handle.get_result() for handle in handles]
        seconds = time.perf_counter() - started
        assert results == list(range(tasks))
    finally:
        DBOS.destroy()
    return {"seconds": seconds, "enqueue": enqueued, "lateness": []}


def run_apscheduler(directory: Path, tasks: int) -> dict[str, Any]:
    """Date jobs in APScheduler 3's SQLAlchemy job store on SQLite."""
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler

    global _aps_done
    _aps_done = Done(tasks)
    scheduler = BackgroundScheduler(
        jobstores={"default": SQLAlchemyJobStore(url=f"sqlite:///{directory / 'aps.sqlite'}")},
        executors={"default": ThreadPoolExecutor(10)},
        job_defaults={"misfire_grace_time": None},
    )
    scheduler.start()
    started = time.perf_counter()
    for number in range(tasks):
        due = time.time() + 1
        scheduler.add_job(
            _aps_noop,
            "date",
            run_date=datetime.fromtimestamp(due, UTC),
            args=[due],
            id=f"job-{number}",
        )
    enqueued = time.perf_counter() - started
    _aps_done.wait()
    while scheduler.get_jobs():
        time.sleep(0.001)
    seconds = time.perf_counter() - started
    scheduler.shutdown()
    return {"seconds": seconds, "enqueue": enqueued, "lateness": _aps_done.lateness}


_aps_done: Done | None = None


def _aps_noop(due: float) -> None:
    """APScheduler stores jobs by reference, so the job is a module-level function."""
    assert _aps_done is not None
    _aps_done.add(due)


def child(name: str, mode: str, tasks: int, directory: Path) -> dict[str, Any]:
    """Run one system's workload here (in the child process)."""
    delayed = mode == "delayed"
    if name.startswith("durability"):
        callers = 1 if name == "durability-1" else CALLERS
        return run_durability(directory, tasks, callers, delayed)
    if name.startswith("huey"):
        return run_huey(directory, tasks, delayed, HUEY_PRODUCERS if name == "huey-8" else 1)
    if name == "persist-queue":
        return run_persist_queue(directory, tasks)
    if name == "dbos":
        return run_dbos(directory, tasks)
    if name == "apscheduler":
        return run_apscheduler(directory, tasks)
    raise ValueError(f"unknown system {name!r}")


def run_child(name: str, mode: str, tasks: int, directory: Path) -> dict[str, Any]:
    """Run one system in a subprocess; its result, or the reason it could not run."""
    here = directory / f"{name}-{mode}"
    here.mkdir()
    command = [sys.executable, __file__, "--child", name, "--mode", mode]
    command += ["--tasks", str(tasks), "--dir", str(here)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=1_000, help="immediate tasks")
    parser.add_argument("--delayed", type=int, default=500, help="delayed tasks")
    parser.add_argument("--quick", action="store_true", help="100 tasks of each kind")
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
        args.tasks = args.delayed = 100
    only = set(filter(None, args.only.split(",")))
    results: dict[tuple[str, str], dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="durability-peers-", dir=args.dir) as tmp:
        for mode, names, tasks in (
            ("immediate", IMMEDIATE, args.tasks),
            ("delayed", DELAYED, args.delayed),
        ):
            for name in names:
                if only and name not in only:
                    continue
                results[(name, mode)] = run_child(name, mode, tasks, Path(tmp))
                print(f"{name} {mode} done", file=sys.stderr)
    report(args, results)


def report(args: argparse.Namespace, results: dict[tuple[str, str], dict[str, Any]]) -> None:
    """The table (rates and ratios), then how each system was configured."""
    versions = f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}"
    print(f"{versions}, {platform.machine()}, real clock, one run, each system in its own process")
    print()
    print(
        "| workload | system | tasks | completed/s | durability (100 callers) vs this "
        "| enqueued/s | late p50 / p99 |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for mode, tasks in (("immediate", args.tasks), ("delayed", args.delayed)):
        reference = results.get(("durability-100", mode), {})
        reference_rate = tasks / reference["seconds"] if "seconds" in reference else None
        for (name, result_mode), result in results.items():
            if result_mode != mode:
                continue
            label = "due in 1 s" if mode == "delayed" else "immediate"
            system = LABELS[name]
            if "error" in result:
                print(f"| {label} | {system} | {tasks:,} | left out: {result['error']} | | | |")
                continue
            rate = tasks / result["seconds"]
            ratio = f"{reference_rate / rate:.1f}x" if reference_rate else ""
            late = result["lateness"]
            late_text = (
                f"{statistics.median(late):,.0f} / {_percentile(late, 0.99):,.0f} ms"
                if late
                else ""
            )
            print(
                f"| {label} | {system} | {tasks:,} | {rate:,.0f} | {ratio} "
                f"| {tasks / result['enqueue']:,.0f} | {late_text} |"
            )
    print()
    print("How each system is configured (all on SQLite files on the same disk):")
    print()
    for name, note in NOTES.items():
        if any(key[0] == name for key in results):
            print(f"- {note}")
    print(
        "- completed/s: tasks over the time from the first enqueue to the last acknowledged "
        "completion (for delayed work it includes the 1 s delay); enqueued/s: tasks over the "
        "time until the last enqueue returned; late: run time minus due time"
    )


if __name__ == "__main__":
    main()
