"""The floor of `bench/workflows.py`: raw sqlite3 making only the synced commits a
workflow's guarantee forces, with nothing around them.

A create is durable before it is acknowledged; a step's result is durable before the
next step starts (and before the workflow is complete). So a workflow of n steps makes
n + 1 synced commits at the least: the create (with its first step's start), then per
step its result with the next step's start, the last one with the instance complete.
Here those commits are all there is: WAL, `synchronous=FULL` (each commit's log
synced), one connection, no step code, no journal read, no polling. Many instances at
once share each commit: round k holds step k of every instance.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

SCHEMA = (
    "CREATE TABLE instances (key TEXT PRIMARY KEY, status TEXT NOT NULL, output TEXT)",
    "CREATE TABLE steps (key TEXT NOT NULL, name TEXT NOT NULL, status TEXT NOT NULL, "
    "result TEXT, PRIMARY KEY (key, name))",
)

Statement = tuple[str, tuple[object, ...]]


class Floor:
    """One database file and the commits of workflows on it."""

    def __init__(self, path: Path) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=FULL")
        for statement in SCHEMA:
            self.connection.execute(statement)

    def commit(self, statements: list[Statement]) -> None:
        """One transaction of `statements`, synced when `COMMIT` returns."""
        execute = self.connection.execute
        execute("BEGIN IMMEDIATE")
        for text, values in statements:
            execute(text, values)
        execute("COMMIT")

    def workflows(self, keys: list[str], steps: int) -> None:
        """Instances `keys`, each of `steps` no-op steps, all at once."""
        self.commit(
            [
                statement
                for key in keys
                for statement in (
                    ("INSERT INTO instances VALUES (?, 'running', NULL)", (key,)),
                    ("INSERT INTO steps VALUES (?, '0', 'running', NULL)", (key,)),
                )
            ]
        )
        for number in range(steps):
            self.commit([s for key in keys for s in _step_done(key, number, steps)])

    def close(self) -> None:
        self.connection.close()


def _step_done(key: str, number: int, steps: int) -> list[Statement]:
    """Step `number`'s result, with the next step's start or the instance complete."""
    name = str(number)
    done = (
        "UPDATE steps SET status = 'complete', result = ? WHERE key = ? AND name = ?",
        (name, key, name),
    )
    if number == steps - 1:
        return [
            done,
            ("UPDATE instances SET status = 'complete', output = ? WHERE key = ?", (name, key)),
        ]
    return [done, ("INSERT INTO steps VALUES (?, ?, 'running', NULL)", (key, str(number + 1)))]


def floor_figures(
    directory: Path,
    steps: int,
    instances: int,
    samples: int,
    percentiles: Callable[[list[float]], tuple[float, float]],
) -> dict[str, float]:
    """steps/s of one instance and of `instances` at once, and the 3-step workflow's
    create-to-complete p50 and p99 (ms), at the floor."""
    floor = Floor(directory / "floor.sqlite")
    figures: dict[str, float] = {}
    try:
        floor.workflows(["warm-up"], 3)
        began = time.perf_counter()
        floor.workflows(["long"], steps)
        figures["one instance"] = steps / (time.perf_counter() - began)
        began = time.perf_counter()
        floor.workflows([f"many-{n}" for n in range(instances)], 10)
        figures["one object"] = 10 * instances / (time.perf_counter() - began)
        latencies = []
        for sample in range(samples):
            began = time.perf_counter()
            floor.workflows([f"three-{sample}"], 3)
            latencies.append((time.perf_counter() - began) * 1000)
        figures["p50 ms"], figures["p99 ms"] = percentiles(latencies)
    finally:
        floor.close()
    return figures
