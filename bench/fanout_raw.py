"""Raw sqlite3 rows of bench/fanout.py: the fanout's row work with no library above it.

`bench_raw` does each message's row work in one commit (or `per_commit` messages per
commit); `bench_floor` does it with the fanout's own commit pattern and guarantees, one
row per statement step (`executemany`), and `bench_floor_set` the same commits with
multi-row statements of at most 100 bindings (all the Durable Object SQL API offers:
it has no `executemany`). All use the fanout's tables and indexes as its migrations
create them.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from durability._fanout.schema import FANOUT_MIGRATIONS

TARGETS = ("email", "audit")
PAYLOAD = '{"kind":"value","value":0}'
BATCH = 100
"""Deliveries one target claims and settles per pair of commits (the library's batches)."""
LEASE_MS = 300_000
KEYS_PER_STATEMENT = 50
"""Ids one set-based claim or removal names (under the 100 bindings a query may have)."""
MESSAGES_PER_INSERT = 19
"""Manifests one multi-row insert names: 5 bindings each, 95 in all."""
DELIVERIES_PER_INSERT = 24
"""Delivery rows one multi-row insert names: 4 bindings each and 2 shared, 98 in all."""

Execute = Callable[[str, Sequence[Any]], object]
"""Runs one statement with its bindings (raw sqlite3, or the runtime's `sql.exec`)."""


@functools.cache
def _rows(width: int, count: int) -> str:
    """`count` rows of `width` placeholders for a VALUES list."""
    row = "(" + ", ".join("?" * width) + ")"
    return ", ".join([row] * count)


@functools.cache
def _insert_messages(count: int) -> str:
    return (
        "INSERT INTO durability_fanout_messages (key, id, payload, targets, remaining, seq, "
        'created_at, generation_id) SELECT column1, column2, column3, \'["audit","email"]\', '
        f"2, column4, column5, 'g' FROM (VALUES {_rows(5, count)})"
    )


@functools.cache
def _insert_deliveries(count: int) -> str:
    return (
        "INSERT INTO durability_fanout_deliveries (id, message_key, target_id, seq, status, "
        "phase, attempt, next_attempt_at, created_at, generation_id) SELECT column1, column2, "
        "column3, column4, 'pending', 'delivery', 0, ?, ?, 'g' "
        f"FROM (VALUES {_rows(4, count)})"
    )


@functools.cache
def _claims(count: int) -> str:
    return (
        "UPDATE durability_fanout_deliveries SET attempt = attempt + 1, next_attempt_at = ? "
        f"WHERE id IN ({_rows(1, count)}) AND +generation_id = 'g' AND +attempt = 0"
    )


@functools.cache
def _removals(count: int) -> tuple[str, str, str]:
    marks = _rows(1, count)
    return (
        f"DELETE FROM durability_fanout_deliveries WHERE id IN ({marks}) "
        "AND +generation_id = 'g' AND +attempt = 1",
        f"UPDATE durability_fanout_messages SET remaining = remaining - 1 WHERE key IN ({marks})",
        f"DELETE FROM durability_fanout_messages WHERE key IN ({marks}) AND remaining <= 0",
    )


DUE = (
    "SELECT d.id, d.message_key, m.payload FROM durability_fanout_deliveries AS d "
    "LEFT JOIN durability_fanout_messages AS m ON m.key = d.message_key "
    "WHERE d.target_id = ? AND d.phase = 'delivery' AND d.attempt = 0 "
    "AND +d.next_attempt_at <= ? ORDER BY d.seq LIMIT ?"
)
"""A target's due deliveries, oldest first, with their messages' payloads."""


def register_set(execute: Execute, keys: list[str], first_seq: int, now: int) -> None:
    """The manifests and both delivery rows of `keys` (sequence numbers from
    `first_seq`), in multi-row statements."""
    numbered = list(enumerate(keys, first_seq))
    for first in range(0, len(numbered), MESSAGES_PER_INSERT):
        part = numbered[first : first + MESSAGES_PER_INSERT]
        execute(
            _insert_messages(len(part)),
            [value for seq, key in part for value in (key, key, PAYLOAD, seq, now)],
        )
    deliveries = [
        (f'["{key}","{target}"]', key, target, seq) for seq, key in numbered for target in TARGETS
    ]
    for first in range(0, len(deliveries), DELIVERIES_PER_INSERT):
        part = deliveries[first : first + DELIVERIES_PER_INSERT]
        bindings = [now, now, *[value for row in part for value in row]]
        execute(_insert_deliveries(len(part)), bindings)


def claim_set(execute: Execute, ids: list[str], now: int) -> None:
    """The claims of one batch's deliveries `ids`, set-based."""
    for first in range(0, len(ids), KEYS_PER_STATEMENT):
        part = ids[first : first + KEYS_PER_STATEMENT]
        execute(_claims(len(part)), [now + LEASE_MS, *part])


def remove_set(execute: Execute, ids: list[str], keys: list[str]) -> None:
    """The removal of one batch's acknowledged deliveries `ids` (of messages `keys`), and
    the release of the manifests they were the last of, set-based."""
    for first in range(0, len(ids), KEYS_PER_STATEMENT):
        part_ids = ids[first : first + KEYS_PER_STATEMENT]
        part_keys = keys[first : first + KEYS_PER_STATEMENT]
        deliveries, lower, release = _removals(len(part_ids))
        execute(deliveries, part_ids)
        execute(lower, part_keys)
        execute(release, part_keys)


def bench_raw(directory: Path, messages: int, per_commit: int) -> float:
    """Seconds for raw sqlite3 to register, claim and settle `messages` for two targets."""
    connection = sqlite3.connect(directory / f"raw-{per_commit}.sqlite3", isolation_level=None)
    try:
        _create_tables(connection)
        payload = PAYLOAD
        started = time.perf_counter()
        for first in range(0, messages, per_commit):
            connection.execute("BEGIN IMMEDIATE")
            for number in range(first, min(first + per_commit, messages)):
                _raw_message(connection, f"m-{number}", number, payload)
            connection.execute("COMMIT")
        elapsed = time.perf_counter() - started
        (left,) = connection.execute("SELECT COUNT(*) FROM durability_fanout_messages").fetchone()
        assert left == 0, left
        return elapsed
    finally:
        connection.close()


def _create_tables(connection: sqlite3.Connection) -> None:
    """The very tables and indexes the fanout uses, so the row work is the same."""
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    for migration in FANOUT_MIGRATIONS:
        for statement in migration.up:
            connection.execute(statement)


def bench_floor(directory: Path, messages: int, group: int, batch: int) -> tuple[float, float]:
    """Seconds and process CPU seconds for raw sqlite3 to deliver `messages` to two targets
    with the fanout's commit pattern and guarantees, and nothing else.

    Enqueues are registered `group` at a time (concurrent callers of one turn) in one
    commit; each target then takes its due rows `batch` at a time, commits their claims
    before it would hand them over, and commits their removal (with the manifests'
    release) once the batch is acknowledged. Statements run through `executemany`, with
    no Python per row beyond building the parameters.
    """
    connection = sqlite3.connect(directory / "floor.sqlite3", isolation_level=None)
    try:
        _create_tables(connection)
        payload = PAYLOAD
        started = time.perf_counter()
        cpu_started = time.process_time()
        for first in range(0, messages, group):
            keys = [f"m-{number}" for number in range(first, min(first + group, messages))]
            _floor_register(connection, keys, payload)
            for target in TARGETS:
                while _floor_batch(connection, target, batch):
                    pass
        return _finished(connection, started, cpu_started)
    finally:
        connection.close()


def bench_floor_set(directory: Path, messages: int, group: int) -> tuple[float, float]:
    """`bench_floor` with multi-row statements of at most 100 bindings instead of a
    statement step per row: the same commits, in the statements the Durable Object SQL
    API allows."""
    connection = sqlite3.connect(directory / "floor-set.sqlite3", isolation_level=None)
    try:
        _create_tables(connection)
        execute: Execute = connection.execute
        started = time.perf_counter()
        cpu_started = time.process_time()
        for first in range(0, messages, group):
            keys = [f"m-{number}" for number in range(first, min(first + group, messages))]
            connection.execute("BEGIN IMMEDIATE")
            (end,) = connection.execute(
                "UPDATE durability_fanout_seq SET next_seq = next_seq + ? WHERE id = 1 "
                "RETURNING next_seq",
                (len(keys),),
            ).fetchone()
            register_set(execute, keys, end - len(keys), int(time.time() * 1000))
            connection.execute("COMMIT")
            for target in TARGETS:
                while True:
                    now = int(time.time() * 1000)
                    rows = connection.execute(DUE, (target, now, BATCH)).fetchall()
                    if not rows:
                        break
                    ids = [row[0] for row in rows]
                    connection.execute("BEGIN IMMEDIATE")
                    claim_set(execute, ids, now)
                    connection.execute("COMMIT")
                    connection.execute("BEGIN IMMEDIATE")
                    remove_set(execute, ids, [row[1] for row in rows])
                    connection.execute("COMMIT")
        return _finished(connection, started, cpu_started)
    finally:
        connection.close()


def _finished(
    connection: sqlite3.Connection, started: float, cpu_started: float
) -> tuple[float, float]:
    """Seconds and process CPU seconds since `started` and `cpu_started`, once every
    manifest is gone (checked)."""
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    (left,) = connection.execute("SELECT COUNT(*) FROM durability_fanout_messages").fetchone()
    assert left == 0, left
    return elapsed, cpu


def _floor_register(connection: sqlite3.Connection, keys: list[str], payload: str) -> None:
    """One commit: the sequence, the manifests and both delivery rows of each key."""
    now = int(time.time() * 1000)
    connection.execute("BEGIN IMMEDIATE")
    (end,) = connection.execute(
        "UPDATE durability_fanout_seq SET next_seq = next_seq + ? WHERE id = 1 RETURNING next_seq",
        (len(keys),),
    ).fetchone()
    first_seq = end - len(keys)
    connection.executemany(
        'INSERT INTO durability_fanout_messages VALUES (?, ?, ?, \'["audit","email"]\', 2, '
        "?, ?, 'g')",
        [(key, key, payload, seq, now) for seq, key in enumerate(keys, first_seq)],
    )
    connection.executemany(
        "INSERT INTO durability_fanout_deliveries (id, message_key, target_id, seq, status, "
        "phase, attempt, next_attempt_at, created_at, generation_id) "
        "VALUES (?, ?, ?, ?, 'pending', 'delivery', 0, ?, ?, 'g')",
        [
            (f'["{key}","{target}"]', key, target, seq, now, now)
            for seq, key in enumerate(keys, first_seq)
            for target in TARGETS
        ],
    )
    connection.execute("COMMIT")


def _floor_batch(connection: sqlite3.Connection, target: str, batch: int) -> int:
    """Read, claim (one commit) and settle (one commit) one batch of `target`; its size."""
    now = int(time.time() * 1000)
    rows = connection.execute(DUE, (target, now, batch)).fetchall()
    if not rows:
        return 0
    connection.execute("BEGIN IMMEDIATE")
    connection.executemany(
        "UPDATE durability_fanout_deliveries SET attempt = attempt + 1, next_attempt_at = ? "
        "WHERE id = ? AND +generation_id = 'g' AND +attempt = 0",
        [(now + LEASE_MS, row[0]) for row in rows],
    )
    connection.execute("COMMIT")
    connection.execute("BEGIN IMMEDIATE")
    connection.executemany(
        "DELETE FROM durability_fanout_deliveries "
        "WHERE id = ? AND +generation_id = 'g' AND +attempt = 1",
        [(row[0],) for row in rows],
    )
    keys = [(row[1],) for row in rows]
    connection.executemany(
        "UPDATE durability_fanout_messages SET remaining = remaining - 1 WHERE key = ?", keys
    )
    connection.executemany(
        "DELETE FROM durability_fanout_messages WHERE key = ? AND remaining <= 0", keys
    )
    connection.execute("COMMIT")
    return len(rows)


def _raw_message(connection: sqlite3.Connection, key: str, now: int, payload: str) -> None:
    (seq,) = connection.execute(
        "SELECT next_seq FROM durability_fanout_seq WHERE id = 1"
    ).fetchone()
    connection.execute("UPDATE durability_fanout_seq SET next_seq = ? WHERE id = 1", (seq + 1,))
    connection.execute(
        "INSERT INTO durability_fanout_messages VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (key, key, payload, '["audit","email"]', len(TARGETS), seq, now, "g"),
    )
    for target in TARGETS:
        connection.execute(
            "INSERT INTO durability_fanout_deliveries (id, message_key, target_id, seq, status, "
            "phase, attempt, next_attempt_at, created_at, generation_id) "
            "VALUES (?, ?, ?, ?, 'pending', 'delivery', 0, ?, ?, 'g')",
            (f'["{key}","{target}"]', key, target, seq, now, now),
        )
    for target in TARGETS:
        row_id = f'["{key}","{target}"]'
        connection.execute(
            "UPDATE durability_fanout_deliveries SET attempt = attempt + 1, next_attempt_at = ? "
            "WHERE id = ? AND attempt = 0",
            (now + LEASE_MS, row_id),
        )
        connection.execute(
            "DELETE FROM durability_fanout_deliveries WHERE id = ? AND attempt = 1", (row_id,)
        )
        (remaining,) = connection.execute(
            "UPDATE durability_fanout_messages SET remaining = remaining - 1 WHERE key = ? "
            "RETURNING remaining",
            (key,),
        ).fetchone()
        if remaining == 0:
            connection.execute("DELETE FROM durability_fanout_messages WHERE key = ?", (key,))
