"""Raw sqlite3 beside the runtime in bench/objects.py: the same row work with nothing
above the statements (creation, commits on open files, reopening closed files, memory
per open connection), and the phase marks the fsync counter splits a trace at."""

from __future__ import annotations

import ctypes
import gc
import os
import sqlite3
import time
import tracemalloc
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from functools import partial
from pathlib import Path

MARK_ROOT = "/durability-bench-mark"


def mark(phase: str, edge: str) -> None:
    """A syscall strace can see: the fsync counter splits the trace at these."""
    os.access(f"{MARK_ROOT}/{phase}/{edge}", os.F_OK)


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Mark the start and end of a phase for the fsync counter."""
    mark(name, "begin")
    try:
        yield
    finally:
        mark(name, "end")


def _create_raw(file: Path, at: int) -> sqlite3.Connection:
    """A new WAL file whose table and first row are one commit (the least raw can do)."""
    connection = sqlite3.connect(file, isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    connection.execute("BEGIN IMMEDIATE")
    connection.execute("CREATE TABLE ticks (id INTEGER PRIMARY KEY, at INTEGER NOT NULL)")
    connection.execute("INSERT INTO ticks (at) VALUES (?)", (at,))
    connection.execute("COMMIT")
    return connection


def _commit_one(connection: sqlite3.Connection, at: int) -> None:
    connection.execute("BEGIN IMMEDIATE")
    connection.execute("INSERT INTO ticks (at) VALUES (?)", (at,))
    connection.execute("COMMIT")


def _each(
    write: Callable[[sqlite3.Connection, int], None], connections: list[sqlite3.Connection]
) -> None:
    """`write(connection, 0)` on each of `connections`, in turn (one thread's share)."""
    for connection in connections:
        write(connection, 0)


def raw_create(
    directory: Path, count: int, name: str = "raw-create"
) -> tuple[float, list[sqlite3.Connection]]:
    """Seconds to create `count` files, each with its table and one committed row."""
    directory.mkdir(parents=True)
    connections = []
    with phase(name):
        started = time.perf_counter()
        for number in range(count):
            connections.append(_create_raw(directory / f"{number}.sqlite3", number))
        elapsed = time.perf_counter() - started
    return elapsed, connections


def raw_deliveries(connections: list[sqlite3.Connection], threads: int) -> float:
    """Seconds to commit one row in each open file, in turn (split over `threads`)."""
    with phase(f"raw-commit-{threads}"):
        started = time.perf_counter()
        if threads == 1:
            for number, connection in enumerate(connections):
                _commit_one(connection, number)
        else:
            slices = [connections[first::threads] for first in range(threads)]
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(partial(_each, _commit_one), slices))
        return time.perf_counter() - started


def raw_reopen(directory: Path, count: int) -> float:
    """Seconds to open each closed file and commit one row in it, in turn (its WAL is
    created anew); the files are then closed (checkpointed) outside the timing."""
    connections = []
    with phase("raw-reopen"):
        started = time.perf_counter()
        for number in range(count):
            connection = sqlite3.connect(
                directory / f"{number}.sqlite3", isolation_level=None, check_same_thread=False
            )
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=FULL")
            _commit_one(connection, number)
            connections.append(connection)
        elapsed = time.perf_counter() - started
        for connection in connections:
            connection.close()
    return elapsed


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def settled_memory() -> tuple[int, int]:
    """(RSS, tracemalloc current) after a full collection and a malloc_trim."""
    gc.collect()
    with suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    return _rss_bytes(), tracemalloc.get_traced_memory()[0]


def raw_memory(directory: Path, count: int) -> float:
    """RSS per open raw sqlite3 connection to a small WAL file (1 table, 1 row)."""
    directory.mkdir(parents=True)
    for number in range(count):
        _create_raw(directory / f"{number}.sqlite3", number).close()
    rss0, _ = settled_memory()
    connections = []
    for number in range(count):
        connection = sqlite3.connect(directory / f"{number}.sqlite3", isolation_level=None)
        connection.execute("PRAGMA synchronous=FULL")
        _commit_one(connection, number)
        connections.append(connection)
    rss = (settled_memory()[0] - rss0) / count
    for connection in connections:
        connection.close()
    return rss


def _mark_pending(connection: sqlite3.Connection, at: int) -> None:
    """The runtime's live delivery, in raw SQL: one row with the retry marker in one
    commit, then the marker cleared in a second commit."""
    connection.execute("BEGIN IMMEDIATE")
    connection.execute("INSERT INTO ticks (at) VALUES (?)", (at,))
    connection.execute("INSERT OR REPLACE INTO retry (id, at) VALUES (1, ?)", (at,))
    connection.execute("COMMIT")
    connection.execute("BEGIN IMMEDIATE")
    connection.execute("DELETE FROM retry WHERE id = 1")
    connection.execute("COMMIT")


def raw_two_commits(connections: list[sqlite3.Connection], threads: int) -> float:
    """Seconds for the runtime's two commits per delivery in each open file, from
    `threads` threads (the marker tables are created outside the timing)."""
    for connection in connections:
        connection.execute("CREATE TABLE IF NOT EXISTS retry (id INTEGER PRIMARY KEY, at INTEGER)")
    slices = [connections[first::threads] for first in range(threads)]
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(partial(_each, _mark_pending), slices))
    return time.perf_counter() - started
