"""Raw sqlite3 rows of bench/fanout.py: the fanout's row work with no library above it.

`bench_raw` does each message's row work in one commit (or `per_commit` messages per
commit); `bench_floor` does it with the fanout's own commit pattern and guarantees.
Both use the fanout's tables and indexes as its migrations create them.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from durability._fanout.schema import FANOUT_MIGRATIONS

TARGETS = ("email", "audit")


def bench_raw(directory: Path, messages: int, per_commit: int) -> float:
    """Seconds for raw sqlite3 to register, claim and settle `messages` for two targets."""
    connection = sqlite3.connect(directory / f"raw-{per_commit}.sqlite3", isolation_level=None)
    try:
        _create_tables(connection)
        payload = '{"kind":"value","value":0}'
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
        payload = '{"kind":"value","value":0}'
        started = time.perf_counter()
        cpu_started = time.process_time()
        for first in range(0, messages, group):
            keys = [f"m-{number}" for number in range(first, min(first + group, messages))]
            _floor_register(connection, keys, payload)
            for target in TARGETS:
                while _floor_batch(connection, target, batch):
                    pass
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        (left,) = connection.execute("SELECT COUNT(*) FROM durability_fanout_messages").fetchone()
        assert left == 0, left
        return elapsed, cpu
    finally:
        connection.close()


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
    rows = connection.execute(
        "SELECT d.id, d.message_key, m.payload FROM durability_fanout_deliveries AS d "
        "LEFT JOIN durability_fanout_messages AS m ON m.key = d.message_key "
        "WHERE d.target_id = ? AND d.phase = 'delivery' AND d.attempt = 0 "
        "AND +d.next_attempt_at <= ? ORDER BY d.seq LIMIT ?",
        (target, now, batch),
    ).fetchall()
    if not rows:
        return 0
    connection.execute("BEGIN IMMEDIATE")
    connection.executemany(
        "UPDATE durability_fanout_deliveries SET attempt = attempt + 1, next_attempt_at = ? "
        "WHERE id = ? AND +generation_id = 'g' AND +attempt = 0",
        [(now + 300_000, row[0]) for row in rows],
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
            (now + 300_000, row_id),
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
