"""DurabilityLog: append throughput against raw sqlite3, and hot and cold read rates.

    python bench/log.py [--records 20000] [--callers 8] [--rounds 3] [--dir DIR]

Everything runs in one process on real files (WAL, every commit synced) and the real clock.

- appends in batches of 1, 10 and 100 records (~100-byte bodies) on ONE file-backed
  object, each batch one `await stub.append(batch)` that returns once it is durable:
  one caller at a time, and `--callers` concurrent callers (whose batches may share
  a commit). Beside it, raw sqlite3 inserting the same rows into the same tables
  (offset, random key, envelope, size, time; then the sequence row) with one fsynced
  commit per batch.
- hot reads: `log.read` pages of 100 from offset 0 to the head, inside the object.
- cold reads: the same after `trim()` flushed every record to `FileColdStorage`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from durability import DurabilityLog, LogAppendInput, LogRetention, now_ms
from durability._log.schema import LOG_MIGRATIONS
from durability.cold import FileColdStorage
from durability.runtime import DurableObject, Runtime

BATCH_SIZES = (1, 10, 100)
BODY = {"topic": "events", "partitionKey": "user-12345", "payload": "x" * 48}
"""About 100 bytes of JSON (107; 132 as a stored envelope)."""


class Partition(DurableObject):
    """One log; `COLD_DIR` in env, when set, makes trim() flush to files there."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        cold_dir = env["COLD_DIR"]
        self.log: DurabilityLog[Any] = DurabilityLog(
            context=ctx,
            retention=LogRetention(max_records=1) if cold_dir else None,
            cold=FileColdStorage(cold_dir) if cold_dir else None,
        )

    async def append(self, bodies: list[Any]) -> int:
        result = await self.log.append([LogAppendInput(body) for body in bodies])
        assert result.success and result.value is not None
        return len(result.value)

    async def read_all(self) -> list[float]:
        """Read every record from offset 0; [records, seconds]."""
        started = time.perf_counter()
        offset = count = 0
        while True:
            page = await self.log.read(offset)
            if not page.records:
                return [count, time.perf_counter() - started]
            count += len(page.records)
            offset = page.next_offset

    async def trim(self) -> int:
        return await self.log.trim()


def bench_raw(directory: Path, batch: int, records: int) -> float:
    """Seconds for raw sqlite3 to insert `records` log rows, one commit per `batch`."""
    file = directory / f"raw-{batch}-{uuid.uuid4().hex[:8]}.sqlite3"
    connection = sqlite3.connect(file, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        for statement in LOG_MIGRATIONS[0].up:
            connection.execute(statement)
        payload = json.dumps({"kind": "value", "value": BODY}, separators=(",", ":"))
        size = len(payload.encode())
        offset = 0
        started = time.perf_counter()
        for _ in range(records // batch):
            at = now_ms()
            rows = [(offset + i, str(uuid.uuid4()), payload, size, at) for i in range(batch)]
            connection.execute("BEGIN")
            connection.executemany(
                "INSERT INTO durability_log_records (offset, dedup_key, payload, bytes, "
                "appended_at) VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            connection.execute(
                "UPDATE durability_log_seq SET next_offset = ?, total_bytes = total_bytes + ? "
                "WHERE id = 1",
                (offset + batch, size * batch),
            )
            connection.execute("COMMIT")
            offset += batch
        return time.perf_counter() - started
    finally:
        connection.close()


async def bench_appends(directory: Path, batch: int, records: int, callers: int) -> float:
    """Seconds for `callers` callers to append `records` records in batches of `batch`."""
    path = directory / f"runtime-{batch}-{callers}-{uuid.uuid4().hex[:8]}"
    async with Runtime(path=path, bindings={"LOGS": Partition, "COLD_DIR": None}) as runtime:
        stub = runtime.env.LOGS.get_by_name("bench")
        bodies = [BODY] * batch
        per_caller = records // batch // callers

        async def caller() -> None:
            for _ in range(per_caller):
                await stub.append(bodies)

        await stub.append(bodies)
        started = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(callers)))
        return time.perf_counter() - started


async def bench_reads(directory: Path, records: int, rounds: int) -> tuple[float, float]:
    """Records/s (median of `rounds`) reading `records` hot records, then flushed to files."""
    bindings = {"LOGS": Partition, "COLD_DIR": str(directory / "cold")}
    async with Runtime(path=directory / "reads", bindings=bindings) as runtime:
        stub = runtime.env.LOGS.get_by_name("bench")
        for _ in range(records // 100):
            await stub.append([BODY] * 100)
        rates: list[list[float]] = [[], []]
        for kind in rates:
            if kind is rates[1]:
                await stub.trim()
            for _ in range(rounds):
                count, seconds = await stub.read_all()
                assert count == records, count
                kind.append(records / seconds)
        return statistics.median(rates[0]), statistics.median(rates[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000, help="records per batched run")
    parser.add_argument("--single", type=int, default=1_000, help="records for batches of 1")
    parser.add_argument("--callers", type=int, default=8, help="concurrent callers")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the median is shown")
    parser.add_argument(
        "--dir", type=Path, default=Path.cwd(), help="where the databases go (a real disk)"
    )
    args = parser.parse_args()
    rows: list[tuple[str, int, float, float | None]] = []
    with tempfile.TemporaryDirectory(prefix="durability-bench-", dir=args.dir) as tmp:
        directory = Path(tmp)
        for batch in BATCH_SIZES:
            records = args.single if batch == 1 else args.records
            raw_runs = [bench_raw(directory, batch, records) for _ in range(args.rounds)]
            raw = records / statistics.median(raw_runs)
            rows.append((f"raw sqlite3, batches of {batch}", records, raw, None))
            for callers in (1, args.callers):
                runs = [
                    asyncio.run(bench_appends(directory, batch, records, callers))
                    for _ in range(args.rounds)
                ]
                rate = records / statistics.median(runs)
                label = f"log.append, batches of {batch}, {callers} caller(s)"
                rows.append((label, records, rate, rate / raw))
            print(f"batches of {batch} done", file=sys.stderr)
        hot, cold = asyncio.run(bench_reads(directory, args.records, args.rounds))
    versions = f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}"
    print(f"{versions}, WAL, every commit synced, {platform.machine()}, median of {args.rounds}")
    print()
    print("| measurement | records | records/s | vs raw |")
    print("|---|---:|---:|---:|")
    for label, records, rate, ratio in rows:
        versus = "" if ratio is None else f"{ratio:.0%}"
        print(f"| {label} | {records:,} | {rate:,.0f} | {versus} |")
    print(f"| log.read, hot pages of 100 | {args.records:,} | {hot:,.0f} | |")
    print(f"| log.read, cold pages (FileColdStorage) | {args.records:,} | {cold:,.0f} | |")


if __name__ == "__main__":
    main()
