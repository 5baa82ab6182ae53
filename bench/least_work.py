"""The least work goal 1's workload allows at all, beside bench/operations.py's engine.

No runtime, no engine, and a smaller record than the engine's: a five-column table keyed
by id (payload, status, attempt, result), two row writes per operation. A registration
that finds a permit free is inserted already claimed; otherwise it waits in a queue and
a later transaction claims it. The guarantees stay: a registration returns only once a
sync that began after its commit has ended; a handler (a no-op) runs only once its
claim is durable the same way; a permit is held from its claim until its handler
returns, and the success goes into the next transaction. Callers await a future each
(no task per call). One transaction per loop turn, `COMMIT` on the loop with
`synchronous=NORMAL`, then an `fdatasync` of the log: on the loop, or in one of
`sync_threads` threads with up to that many syncs in flight, so the loop may write
later turns while earlier ones sync.

With `claim_all`, a turn's new records are all inserted claimed, as the engine's
registrations claim them: the claims' commit is durable before any of their handlers
runs, the handlers run as permits allow (no-ops, each done before the next starts), and
no further commit is needed before they start.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sqlite3
import time
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

LEAST_TABLE = (
    "CREATE TABLE calls (id TEXT PRIMARY KEY, payload TEXT NOT NULL, status TEXT NOT NULL, "
    "attempt INTEGER NOT NULL, result TEXT)"
)
CHUNK = 100
"""Rows one insert names at most."""


@functools.cache
def _insert(count: int, attempt: int) -> str:
    """A multi-row insert of `count` new records whose attempt is `attempt`."""
    row = f"(?, 'null', 'pending', {attempt})"
    return f"INSERT INTO calls (id, payload, status, attempt) VALUES {', '.join([row] * count)}"


def _keyed(count: int) -> str:
    """The head of a set-based statement over `count` ids bound as `c(k)`."""
    return f"WITH c(k) AS (VALUES {', '.join(['(?)'] * count)})"


@functools.cache
def _claim(count: int) -> str:
    """Claim `count` waiting records (first attempt), set-based."""
    return (
        f"{_keyed(count)} UPDATE calls SET attempt = 1 FROM c "
        "WHERE calls.id = c.k AND calls.attempt = 0"
    )


@functools.cache
def _complete(count: int) -> str:
    """Write the successes of `count` claimed records, set-based."""
    return (
        f"{_keyed(count)} UPDATE calls SET status = 'completed', result = 'null' FROM c "
        "WHERE calls.id = c.k AND calls.attempt = 1 AND calls.status = 'pending'"
    )


Turn = tuple[asyncio.Future[None] | None, list[str]]
"""A committed transaction: the future of the registrations it wrote, the ids it claimed."""


class LeastWork:
    """Goal 1's workload with nothing but its guarantees, on one file (see the module)."""

    def __init__(
        self, file: Path, permits: int, sync_threads: int, claim_all: bool = False
    ) -> None:
        self.file = file
        self.connection = sqlite3.connect(file, isolation_level=None)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=NORMAL")
        self.connection.execute(LEAST_TABLE)
        self.log = -1
        self.loop = asyncio.get_running_loop()
        self.permits = permits
        self.claim_all = claim_all
        self.new: list[str] = []
        self.registered: asyncio.Future[None] | None = None
        self.waiting: deque[str] = deque()
        self.succeeded: list[str] = []
        self.scheduled = False
        self.syncer = ThreadPoolExecutor(sync_threads) if sync_threads else None
        self.sync_threads = sync_threads
        self.syncing = 0
        self.unsynced: list[Turn] = []
        self.completed = 0
        self.target = 0
        self.done = asyncio.Event()

    def register(self, id: str) -> asyncio.Future[None]:
        """Queue the registration of `id`; the future ends once it is durable."""
        registered = self.registered
        if registered is None:
            registered = self.registered = self.loop.create_future()
        self.new.append(id)
        self._write_soon()
        return registered

    def _write_soon(self) -> None:
        if not self.scheduled:
            self.scheduled = True
            self.loop.call_soon(self._write)

    def _write(self) -> None:
        """One turn's transaction: the last successes, the claims of the permits they
        freed, the new records (already claimed while permits are left); then its sync."""
        self.scheduled = False
        connection = self.connection
        new, self.new = self.new, []
        registered, self.registered = self.registered, None
        succeeded, self.succeeded = self.succeeded, []
        connection.execute("BEGIN IMMEDIATE")
        if succeeded:
            connection.execute(_complete(len(succeeded)), succeeded)
        if self.claim_all:
            # Every new record claimed by this commit; the no-op handlers then run one
            # after another, each done before the next starts (a permit is never short).
            claimed = new
            for first in range(0, len(new), CHUNK):
                part = new[first : first + CHUNK]
                connection.execute(_insert(len(part), 1), part)
        else:
            self.permits += len(succeeded)
            claimed = self._claim_and_insert(new)
        connection.execute("COMMIT")
        self._count(len(succeeded))
        if self.log < 0:
            self.log = os.open(f"{self.file}-wal", os.O_RDWR)
        turn = (registered, claimed)
        if self.syncer is None:
            os.fdatasync(self.log)
            self._durable([turn])
            return
        self.unsynced.append(turn)
        if self.syncing < self.sync_threads:
            self._sync()

    def _claim_and_insert(self, new: list[str]) -> list[str]:
        """Claim waiting records for the permits free, insert `new` (claimed while permits
        are left, the others waiting); the ids claimed."""
        connection = self.connection
        claimed = [self.waiting.popleft() for _ in range(min(self.permits, len(self.waiting)))]
        if claimed:
            connection.execute(_claim(len(claimed)), claimed)
        free = self.permits - len(claimed)
        for first in range(0, len(new), CHUNK):
            part = new[first : first + CHUNK]
            running = part[:free]
            if running:
                connection.execute(_insert(len(running), 1), running)
                free -= len(running)
                claimed.extend(running)
            if len(running) < len(part):
                queued = part[len(running) :]
                connection.execute(_insert(len(queued), 0), queued)
                self.waiting.extend(queued)
        self.permits -= len(claimed)
        return claimed

    def _count(self, completed: int) -> None:
        self.completed += completed
        if self.completed >= self.target:
            self.done.set()

    def _sync(self) -> None:
        """Start a sync in a thread covering every commit not yet covered."""
        assert self.syncer is not None
        covered, self.unsynced = self.unsynced, []
        self.syncing += 1
        synced = self.loop.run_in_executor(self.syncer, os.fdatasync, self.log)
        synced.add_done_callback(functools.partial(self._synced, covered))

    def _synced(self, covered: list[Turn], synced: asyncio.Future[None]) -> None:
        self.syncing -= 1
        synced.result()
        self._durable(covered)
        if self.unsynced and not self.scheduled:
            self._sync()

    def _durable(self, turns: list[Turn]) -> None:
        """`turns` are durable: answer their registrations and run their claims'
        handlers (no-ops, done at once); write again if there is work."""
        for registered, claimed in turns:
            if registered is not None:
                registered.set_result(None)
            self.succeeded.extend(claimed)
        if self.succeeded or self.waiting or self.new:
            self._write_soon()

    def close(self) -> int:
        """Close the file; the completed records it holds."""
        return close_counting(self.connection, "calls", self.log, self.syncer)


def close_counting(
    connection: sqlite3.Connection, table: str, log: int, syncer: ThreadPoolExecutor | None
) -> int:
    """Close a model's file, its log descriptor (if opened) and its sync threads; the
    completed records `table` holds."""
    (done,) = connection.execute(
        f"SELECT COUNT(*) FROM {table} WHERE status = 'completed'"
    ).fetchone()
    connection.close()
    if log >= 0:
        os.close(log)
    if syncer is not None:
        syncer.shutdown()
    return int(done)


async def register_all(
    register: Callable[[str], Awaitable[object]], operations: int, callers: int
) -> None:
    """Register ids `op-0` .. `op-{operations - 1}` through `register`, from `callers`
    concurrent callers each taking the next id as soon as its last call returned."""
    ids = iter(range(operations))

    async def caller() -> None:
        for number in ids:
            await register(f"op-{number}")

    await asyncio.gather(*(caller() for _ in range(callers)))


async def bench_least(
    file: Path,
    operations: int,
    callers: int,
    permits: int,
    sync_threads: int,
    *,
    claim_all: bool = False,
) -> float:
    """Seconds for `LeastWork` to register and complete `operations` no-ops, from
    `callers` concurrent callers each registering its next id once the last is durable
    (`claim_all`: a turn's records all claimed by its commit)."""
    least = LeastWork(file, permits, sync_threads, claim_all)
    least.target = operations
    started = time.perf_counter()
    await register_all(least.register, operations, callers)
    await least.done.wait()
    elapsed = time.perf_counter() - started
    while least.syncing:  # the last syncs (the clock has stopped)
        await asyncio.sleep(0.001)
    assert least.close() == operations
    return elapsed
