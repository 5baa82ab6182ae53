"""Acknowledged writes per second: one file-backed object vs raw sqlite3.

    python bench/storage.py [--callers 200] [--writes 50] [--raw-writes 2000] [--rounds 3]

Both sides write to a real file in WAL mode with synchronous=FULL, in the same run on
the same machine. Raw sqlite3 commits once per write (an fsync each). The runtime
takes writes from many concurrent callers on ONE object; a call returns only once its
write is durable, and the runtime lets concurrent calls share a commit. The ratio is
what write coalescing behind the output gate buys.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from durability.runtime import DurableObject, Runtime


class Sink(DurableObject):
    """Stores one row per call."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, body TEXT NOT NULL)"
        )

    async def write(self, body: str) -> None:
        self.ctx.storage.sql.exec("INSERT INTO events (body) VALUES (?)", body)

    async def count(self) -> int:
        return int(self.ctx.storage.sql.exec("SELECT count(*) AS n FROM events").one()["n"])


def bench_raw(directory: Path, writes: int) -> float:
    """Seconds for `writes` inserts into raw sqlite3, one commit (fsync) per write."""
    connection = sqlite3.connect(directory / "raw.sqlite3", isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        connection.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        started = time.perf_counter()
        for number in range(writes):
            connection.execute("BEGIN")
            connection.execute("INSERT INTO events (body) VALUES (?)", (f"event-{number}",))
            connection.execute("COMMIT")
        elapsed = time.perf_counter() - started
        (stored,) = connection.execute("SELECT count(*) FROM events").fetchone()
        assert stored == writes, (stored, writes)
        return elapsed
    finally:
        connection.close()


async def bench_runtime(directory: Path, callers: int, writes: int) -> float:
    """Seconds for `callers` concurrent callers to each get `writes` writes acknowledged."""
    async with Runtime(path=directory / "runtime", bindings={"SINKS": Sink}) as runtime:
        sink = runtime.env.SINKS.get_by_name("bench")
        await sink.count()

        async def caller(number: int) -> None:
            for sequence in range(writes):
                await sink.write(f"event-{number}-{sequence}")

        started = time.perf_counter()
        await asyncio.gather(*(caller(n) for n in range(callers)))
        elapsed = time.perf_counter() - started
        stored = await sink.count()
        assert stored == callers * writes, (stored, callers * writes)
        return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--callers", type=int, default=200, help="concurrent callers")
    parser.add_argument("--writes", type=int, default=50, help="writes per caller")
    parser.add_argument("--raw-writes", type=int, default=2_000, help="raw sqlite3 writes")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the median is shown")
    parser.add_argument(
        "--dir", type=Path, default=Path.cwd(), help="where the databases go (a real disk)"
    )
    args = parser.parse_args()
    raw_times: list[float] = []
    runtime_times: list[float] = []
    for round_number in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="durability-bench-", dir=args.dir) as tmp:
            directory = Path(tmp)
            raw_times.append(bench_raw(directory, args.raw_writes))
            runtime_times.append(asyncio.run(bench_runtime(directory, args.callers, args.writes)))
        print(f"round {round_number + 1}/{args.rounds} done", file=sys.stderr)
    raw_seconds = statistics.median(raw_times)
    runtime_seconds = statistics.median(runtime_times)
    raw_rate = args.raw_writes / raw_seconds
    runtime_writes = args.callers * args.writes
    runtime_rate = runtime_writes / runtime_seconds
    versions = f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}"
    print(f"{versions}, WAL, synchronous=FULL, {platform.machine()}, median of {args.rounds}")
    print()
    print("| writer | acknowledged writes | seconds | writes/s | vs raw |")
    print("|---|---:|---:|---:|---:|")
    print(
        f"| raw sqlite3, one commit per write | {args.raw_writes:,} | {raw_seconds:.2f} "
        f"| {raw_rate:,.0f} | 1.0x |"
    )
    print(
        f"| durability runtime, 1 object, {args.callers} concurrent callers | "
        f"{runtime_writes:,} | {runtime_seconds:.2f} | {runtime_rate:,.0f} "
        f"| {runtime_rate / raw_rate:.1f}x |"
    )
    ratios = sorted(
        (runtime_writes / runtime) / (args.raw_writes / raw)
        for raw, runtime in zip(raw_times, runtime_times, strict=True)
    )
    print()
    print(
        f"runtime vs raw within each round: median {statistics.median(ratios):.1f}x "
        f"(min {ratios[0]:.1f}x, max {ratios[-1]:.1f}x)"
    )


if __name__ == "__main__":
    main()
