"""The per-system runners of bench/peers.py: one system's workload, run in its child process.

Each `run_*` enqueues the tasks with the system's own producer(s), lets its own
worker(s) run them, and returns the run's marks from `Clock.result`; `child` picks the
runner from the system's name (as peers.py lists it).
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


class Done:
    """Thread-safe completion counter with the lateness of each task, in ms."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.count = 0
        self.lateness: list[float] = []
        self.first_due: float | None = None
        self.lock = threading.Lock()
        self.event = threading.Event()

    def add(self, due: float | None = None) -> None:
        with self.lock:
            self.count += 1
            if due is not None:
                self.lateness.append((time.time() - due) * 1000)
                if self.first_due is None or due < self.first_due:
                    self.first_due = due
            if self.count >= self.target:
                self.event.set()

    def wait(self) -> None:
        if not self.event.wait(600):
            raise RuntimeError(f"only {self.count} of {self.target} tasks completed in 600 s")


class Clock:
    """One run's marks (first enqueue, last enqueue, last acknowledged completion) and CPU."""

    def __init__(self) -> None:
        self.wall = self.started = self.enqueue_end = self.ended = 0.0
        self.cpu = 0.0

    def start(self) -> None:
        self.cpu = time.process_time()
        self.wall = time.time()
        self.started = time.perf_counter()

    def enqueued(self) -> None:
        self.enqueue_end = time.perf_counter()

    def stop(self) -> None:
        self.ended = time.perf_counter()
        self.cpu = time.process_time() - self.cpu

    def result(self, done: Done) -> dict[str, Any]:
        """Seconds from the first enqueue; `first_due`: when the earliest task came due."""
        first_due = None if done.first_due is None else done.first_due - self.wall
        return {
            "seconds": self.ended - self.started,
            "enqueue": self.enqueue_end - self.started,
            "first_due": first_due,
            "cpu": self.cpu,
            "lateness": done.lateness,
        }


def run_durability(
    directory: Path, tasks: int, callers: int, delayed: bool, permits: int = 10
) -> dict[str, Any]:
    """No-op durable operations on one file-backed object, due now or in 1 s, with
    `permits` handlers at most running at once (`alarm_concurrency`; 10 is the default)."""
    from durability import Durability, DurabilityScheduler
    from durability.runtime import DurableObject, Runtime

    done = Done(tasks)
    delay_ms = 1000 if delayed else None

    class Worker(DurableObject):
        def __init__(self, ctx: Any, env: Any) -> None:
            super().__init__(ctx, env)
            self.scheduler = DurabilityScheduler(context=ctx, alarm_concurrency=permits)
            self.durability = Durability(scheduler=self.scheduler, handlers={"noop": self.noop})

        def noop(self, call: Any) -> None:
            done.add(call.payload)

        async def register(self, number: int) -> None:
            due = time.time() + 1 if delayed else None
            await self.durability.noop(id=f"op-{number}", payload=due, delay_ms=delay_ms)

        async def completed(self) -> int:
            rows = self.ctx.storage.sql.exec(
                "SELECT COUNT(*) AS n FROM durability_calls WHERE status = 'completed'"
            )
            return int(rows.one()["n"])

        async def alarm(self, info: Any = None) -> None:
            await self.scheduler.alarm(info)

    async def main() -> None:
        async with Runtime(path=directory, bindings={"W": Worker}) as rt:
            stub = rt.env.W.get_by_name("worker")
            await stub.completed()
            numbers = iter(range(tasks))

            async def caller() -> None:
                for number in numbers:
                    await stub.register(number)

            clock.start()
            await asyncio.gather(*(caller() for _ in range(callers)))
            clock.enqueued()
            await asyncio.to_thread(done.wait)
            # This call's result is released only after every earlier commit is durable.
            completed = await stub.completed()
            clock.stop()
            assert completed == tasks, (completed, tasks)

    clock = Clock()
    asyncio.run(main())
    return clock.result(done)


def run_huey(
    directory: Path, tasks: int, delayed: bool, producers: int, results: bool = False
) -> dict[str, Any]:
    """SqliteHuey with its consumer's worker threads in this process (`results`: each
    task's result stored, as a durable operation's is)."""
    from huey import SqliteHuey

    huey = SqliteHuey(
        "bench",
        filename=str(directory / "huey.db"),
        fsync=True,
        journal_mode="wal",
        results=results,
    )
    done = Done(tasks)

    @huey.task()  # type: ignore[untyped-decorator]
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
    clock = Clock()
    clock.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    clock.enqueued()
    done.wait()
    clock.stop()
    consumer.stop(graceful=True)
    return clock.result(done)


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
    clock = Clock()
    clock.start()
    for number in range(tasks):
        queue.put({"task": number})
    clock.enqueued()
    done.wait()
    clock.stop()
    assert queue.acked_count() == tasks, (queue.acked_count(), tasks)
    return clock.result(done)


def run_dbos(directory: Path, tasks: int, wal: bool = False) -> dict[str, Any]:
    """No-op DBOS workflows enqueued on a queue, SQLite system database (`wal`: in WAL
    mode, as durability's files are, each workflow running one step, as a durable
    operation runs its handler)."""
    import logging
    import sqlite3

    from dbos import DBOS

    logging.getLogger("dbos").setLevel(logging.WARNING)
    database = directory / "dbos.sqlite"
    if wal:
        # The journal mode is kept in the file: every connection DBOS opens uses it (and
        # SQLite's default synchronous=FULL, which in WAL syncs each commit's log).
        with sqlite3.connect(database) as connection:
            connection.execute("PRAGMA journal_mode=WAL")
    DBOS(
        config={
            "name": "bench",
            "system_database_url": f"sqlite:///{database}",
            "log_level": "WARNING",
        }
    )

    @DBOS.step()
    def step(number: int) -> int:
        return number

    @DBOS.workflow()
    def noop(number: int) -> int:
        return step(number) if wal else number

    DBOS.launch()
    clock = Clock()
    try:
        queue = DBOS.register_queue("bench", polling_interval_sec=0.01)
        clock.start()
        handles = [queue.enqueue(noop, number) for number in range(tasks)]
        clock.enqueued()
        results = [handle.get_result() for handle in handles]
        clock.stop()
        assert results == list(range(tasks))
    finally:
        DBOS.destroy()
    return clock.result(Done(tasks))


def run_litequeue(directory: Path, tasks: int) -> dict[str, Any]:
    """litequeue: this thread puts, one consumer thread pops and marks done, each on its
    own connection; its default `synchronous=NORMAL` (not durable per commit) raised to
    `FULL` on both, so every put, pop and done is a synced commit."""
    from litequeue import LiteQueue

    file = directory / "litequeue.sqlite3"
    producer = LiteQueue(str(file))
    producer.conn.execute("PRAGMA synchronous = FULL")
    done = Done(tasks)

    def consume() -> None:
        consumer = LiteQueue(str(file))
        consumer.conn.execute("PRAGMA synchronous = FULL")
        finished = 0
        while finished < tasks:
            message = consumer.pop()
            if message is None:
                time.sleep(0.001)
                continue
            consumer.done(message.message_id)
            finished += 1
            done.add()

    worker = threading.Thread(target=consume, daemon=True)
    worker.start()
    clock = Clock()
    clock.start()
    for number in range(tasks):
        producer.put(str(number))
    clock.enqueued()
    done.wait()
    clock.stop()
    worker.join()
    return clock.result(done)


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
    clock = Clock()
    clock.start()
    for number in range(tasks):
        due = time.time() + 1
        scheduler.add_job(
            _aps_noop,
            "date",
            run_date=datetime.fromtimestamp(due, UTC),
            args=[due],
            id=f"job-{number}",
        )
    clock.enqueued()
    _aps_done.wait()
    while scheduler.get_jobs():
        time.sleep(0.001)
    clock.stop()
    scheduler.shutdown()
    return clock.result(_aps_done)


_aps_done: Done | None = None


def _aps_noop(due: float) -> None:
    """APScheduler stores jobs by reference, so the job is a module-level function."""
    assert _aps_done is not None
    _aps_done.add(due)


def child(name: str, mode: str, tasks: int, directory: Path) -> dict[str, Any]:
    """Run one system's workload here (in the child process)."""
    delayed = mode == "delayed"
    system, _, count = name.partition("-")
    if name == "durability-wide":
        return run_durability(directory, tasks, 100, delayed, permits=100)
    if system == "durability":
        return run_durability(directory, tasks, int(count), delayed)
    if name == "huey-results":
        return run_huey(directory, tasks, delayed, 1, results=True)
    if system == "huey":
        return run_huey(directory, tasks, delayed, int(count or 1))
    if name == "persist-queue":
        return run_persist_queue(directory, tasks)
    if name == "litequeue":
        return run_litequeue(directory, tasks)
    if system == "dbos":
        return run_dbos(directory, tasks, wal=name == "dbos-wal")
    if name == "apscheduler":
        return run_apscheduler(directory, tasks)
    raise ValueError(f"unknown system {name!r}")
