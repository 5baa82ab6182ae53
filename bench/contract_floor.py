"""Goal 1's floor on this disk: only the commits and syncs its guarantees force, in raw
sqlite3.

A claim must be durable before its handler starts, and a permit is held from its claim
until its handler returns. So a permit's next claim is written only after the commit
holding its last claim was synced: every synced commit holds at most `permits` claims,
and `operations` operations need at least `operations / permits` synced commits, on one
database whose commits take turns. `floor_seconds` makes exactly that many, each holding
the least row work per operation: its record inserted already claimed, then completed
(set-based, fenced by id and generation) in the next commit; or, with `ahead`, every
record registered first in large commits (as when callers register faster than records
complete), then claimed by an update and completed. The table is the record
every operation keeps: `durability_calls` with its twelve columns, its primary key and
just two indexes (due time by status, creation time; the engine keeps four). No handler,
caller, task or event loop: the statements, the commits and the syncs, nothing else.
Commits use `synchronous=NORMAL`, then an `fdatasync` of the log, which made the
cheapest durable commit on this machine (cheaper than the raw per-step row's `FULL`).

With `groups` above 1, the permits are split into that many groups, each committing
its own records from its own thread (commits take turns behind one lock) and syncing
them while the other groups write: the most that overlapping syncs can give.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from itertools import chain
from pathlib import Path

RECORD_TABLE = (
    "CREATE TABLE durability_calls (id TEXT PRIMARY KEY, operation TEXT NOT NULL, "
    "payload TEXT NOT NULL, status TEXT NOT NULL "
    "CHECK (status IN ('pending', 'completed', 'failed')), result TEXT, "
    "attempt INTEGER NOT NULL DEFAULT 0, next_attempt_at INTEGER NOT NULL, "
    "last_error TEXT, last_error_name TEXT, completed_at INTEGER, "
    "generation_id TEXT NOT NULL DEFAULT 'legacy', created_at INTEGER NOT NULL DEFAULT 0)",
    "CREATE INDEX durability_calls_pending_idx ON durability_calls (status, next_attempt_at)",
    "CREATE INDEX durability_calls_created_idx ON durability_calls (created_at)",
)

AHEAD_PER_COMMIT = 1_000
"""Records one commit registers ahead of their claims."""

Record = tuple[str, str]
"""A record's id and generation."""


@functools.cache
def _insert(count: int, attempt: int) -> str:
    """Insert `count` new records whose attempts so far are `attempt`."""
    row = f"(?, 'noop', 'null', 'pending', {attempt}, ?, ?, ?)"
    return (
        "INSERT INTO durability_calls (id, operation, payload, status, attempt, "
        f"next_attempt_at, generation_id, created_at) VALUES {', '.join([row] * count)}"
    )


@functools.cache
def _fenced(count: int, assignments: str, attempt: int) -> str:
    """Set `assignments` on `count` pending records (bound as id and generation pairs)
    whose attempts so far are `attempt`: the fence of a claim and of a completion."""
    return (
        f"WITH c(k, g) AS (VALUES {', '.join(['(?, ?)'] * count)}) "
        f"UPDATE durability_calls SET {assignments} FROM c WHERE durability_calls.id = c.k "
        f"AND durability_calls.generation_id = c.g AND durability_calls.attempt = {attempt} "
        "AND +durability_calls.status = 'pending'"
    )


def _claim(count: int) -> str:
    """Claim the first attempt of `count` records inserted before."""
    return _fenced(count, "attempt = 1", 0)


def _complete(count: int) -> str:
    """Write the successes of `count` claimed records (then bind the time)."""
    return _fenced(count, "status = 'completed', result = 'null', completed_at = ?", 1)


def turns(records: list[Record], per_commit: int) -> Iterator[tuple[list[Record], list[Record]]]:
    """The commits of one group of `per_commit` permits: what each claims and what it
    completes (what the commit before it claimed)."""
    claimed: list[Record] = []
    for first in range(0, len(records), per_commit):
        claiming = records[first : first + per_commit]
        yield claiming, claimed
        claimed = claiming
    if claimed:
        yield [], claimed


def _bound(records: list[Record], now: int) -> list[object]:
    """The parameters of `_insert` for `records`."""
    return [*chain.from_iterable((id, now, generation, now) for id, generation in records)]


def _run_group(
    file: Path,
    ids: list[str],
    per_commit: int,
    ahead: bool,
    lock: threading.Lock,
    go: threading.Barrier,
) -> None:
    """Commit and sync one group's turns on its own connection."""
    records = [(id, os.urandom(16).hex()) for id in ids]
    try:
        connection = sqlite3.connect(file, isolation_level=None, check_same_thread=False)
        log = os.open(f"{file}-wal", os.O_RDWR)
    except BaseException:
        go.abort()  # the benchmark stops instead of waiting for this group
        raise

    def commit(*statements: tuple[str, list[object]]) -> None:
        with lock:
            connection.execute("BEGIN IMMEDIATE")
            for statement, parameters in statements:
                connection.execute(statement, parameters)
            connection.execute("COMMIT")
        os.fdatasync(log)

    try:
        connection.execute("PRAGMA synchronous=NORMAL")
        go.wait()
        if ahead:
            for first in range(0, len(records), AHEAD_PER_COMMIT):
                chunk = records[first : first + AHEAD_PER_COMMIT]
                commit((_insert(len(chunk), 0), _bound(chunk, time.time_ns() // 1_000_000)))
        for claiming, completed in turns(records, per_commit):
            now = time.time_ns() // 1_000_000
            statements: list[tuple[str, list[object]]] = []
            if claiming and ahead:
                statements.append((_claim(len(claiming)), [*chain.from_iterable(claiming)]))
            elif claiming:
                statements.append((_insert(len(claiming), 1), _bound(claiming, now)))
            if completed:
                statements.append(
                    (_complete(len(completed)), [*chain.from_iterable(completed), now])
                )
            commit(*statements)
    finally:
        os.close(log)
        connection.close()


def floor_seconds(
    file: Path, operations: int, permits: int, groups: int = 1, *, ahead: bool = False
) -> float:
    """Seconds to register, claim and complete `operations` records on a new `file` with
    one synced commit per `permits // groups` claims, `groups` groups syncing at once
    (`ahead`: every record inserted first, `AHEAD_PER_COMMIT` per commit, unclaimed, as
    when callers register faster than records complete; then claimed by an update)."""
    if groups < 1 or permits % groups:
        raise ValueError(f"groups must divide permits ({permits}), got {groups}")
    setup = sqlite3.connect(file, isolation_level=None)
    try:
        setup.execute("PRAGMA journal_mode=WAL")
        for statement in RECORD_TABLE:
            setup.execute(statement)
        ids = [f"op-{number}" for number in range(operations)]
        lock = threading.Lock()
        go = threading.Barrier(groups + 1)
        threads = [
            threading.Thread(
                target=_run_group,
                args=(file, ids[group::groups], permits // groups, ahead, lock, go),
            )
            for group in range(groups)
        ]
        for thread in threads:
            thread.start()
        go.wait()
        started = time.perf_counter()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        (done,) = setup.execute(
            "SELECT COUNT(*) FROM durability_calls WHERE status = 'completed'"
        ).fetchone()
        if done != operations:
            raise RuntimeError(f"{done} of {operations} records completed")
        return elapsed
    finally:
        setup.close()
