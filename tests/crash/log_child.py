"""Child process of the log crash test: appends and commits cursors until it is killed.

Usage: log_child.py PATH SEED. Opens a file-backed Runtime on PATH (real clock), prints
"ready", then runs concurrent producers against a few partitions (single records and
batches, some with deduplication keys drawn from a key space shared by every run) and
one committer that moves the consumer "c" forward, each time followed by a late
commit of an older offset, and a few workers that lease ranges of the consumer "l"
and ack them. Each line is printed, flushed, only after its call returned:
"append P [[body, key], ...] [offsets]", "commit P OFFSET", "lease P BATCH FIRST LAST"
and "ack P BATCH".
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
from typing import Any

from durability import DurabilityLog, LogAppendInput, LogLeaseOptions
from durability.runtime import DurableObject, Runtime

PARTITIONS = 2
PRODUCERS = 24
KEYS = 200
CONSUMER = "c"
LEASED = "l"
LEASERS = 3
LEASES = LogLeaseOptions(max_parallelism=64, lease_ms=600_000)
"""Leases outlast the test: a range held at a kill stays held, never redelivered."""


class Partition(DurableObject):
    """One log partition with JSON-only wrappers for stub calls."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.log: DurabilityLog[Any] = DurabilityLog(context=ctx, leases=LEASES)

    async def append(self, items: list[list[Any]]) -> list[int]:
        """Append `[body, key]` pairs as one batch; a single pair goes in unwrapped."""
        inputs = [LogAppendInput(body, key) for body, key in items]
        result = await self.log.append(inputs[0] if len(inputs) == 1 else inputs)
        if result.value is None:
            raise ValueError(result.error.message if result.error else "append rejected")
        return result.value

    async def commit(self, offset: int) -> None:
        await self.log.commit(CONSUMER, offset)

    async def lease(self, limit: int) -> list[Any] | None:
        """`[batch_id, first_offset, last_offset]` of a new range of consumer LEASED."""
        lease = await self.log.lease(LEASED, limit)
        return None if lease is None else [lease.batch_id, lease.first_offset, lease.last_offset]

    async def ack(self, batch_id: str) -> None:
        await self.log.ack(LEASED, batch_id)

    async def next_offset(self) -> int:
        return (await self.log.bounds()).next_offset

    async def dump(self) -> dict[str, Any]:
        """Bounds, the cursor and every record as `[offset, key, body]`, read page by page."""
        bounds = await self.log.bounds()
        records: list[list[Any]] = []
        offset = bounds.oldest_offset
        while offset < bounds.next_offset:
            page = await self.log.read(offset, limit=100)
            records += [[r.offset, r.deduplication_key, r.body] for r in page.records]
            if page.next_offset <= offset:
                break
            offset = page.next_offset
        return {
            "oldest": bounds.oldest_offset,
            "next": bounds.next_offset,
            "cursor": await self.log.cursor(CONSUMER),
            "records": records,
            "leased_cursor": await self.log.cursor(LEASED),
            "leases": [
                [row.batch_id, row.first_offset, row.last_offset, row.state]
                for row in await self.log.leases(LEASED)
            ],
        }


bindings = {"PARTITIONS": Partition}


def _draw_keys(rng: random.Random, size: int) -> list[str | None]:
    """Deduplication keys for a batch: about 40% keyed, distinct within the batch.

    A key repeated within a batch would share one offset, which the checks do not model.
    """
    drawn = [f"k{rng.randrange(KEYS)}" if rng.random() < 0.4 else None for _ in range(size)]
    return [key if key not in drawn[:i] else None for i, key in enumerate(drawn)]


def _compact(value: Any) -> str:
    """JSON without spaces, so a line splits on spaces into its fields."""
    return json.dumps(value, separators=(",", ":"))


async def main(path: str, seed: int) -> None:
    rng = random.Random(seed)
    async with Runtime(path=path, bindings=bindings) as runtime:
        namespace = runtime.env.PARTITIONS
        stubs = [namespace.get_by_name(f"partition-{n}") for n in range(PARTITIONS)]
        heads = [await stub.next_offset() for stub in stubs]
        out = sys.stdout
        out.write("ready\n")
        out.flush()

        async def producer(number: int) -> None:
            for sequence in range(1_000_000):
                target = rng.randrange(PARTITIONS)
                size = rng.choice((1, 1, rng.randint(2, 6)))
                keys = _draw_keys(rng, size)
                plain = [i for i, key in enumerate(keys) if key is None]
                write = f"{seed}-{number}-{sequence}"
                items = [
                    [{"w": write, "i": i, "key": key, "plain": plain}, key]
                    for i, key in enumerate(keys)
                ]
                offsets = await stubs[target].append(items)
                heads[target] = max(heads[target], *(o + 1 for o in offsets))
                line = f"append {target} {_compact(items)} {_compact(offsets)}\n"
                out.write(line)
                out.flush()

        async def committer() -> None:
            while True:
                target = rng.randrange(PARTITIONS)
                offset = heads[target]
                await stubs[target].commit(offset)
                out.write(f"commit {target} {offset}\n")
                out.flush()
                # A late commit of an older position, which must not rewind the cursor.
                await stubs[target].commit(rng.randrange(offset + 1))
                await asyncio.sleep(0.005)

        async def leaser() -> None:
            while True:
                target = rng.randrange(PARTITIONS)
                lease = await stubs[target].lease(rng.randint(1, 20))
                if lease is None:
                    await asyncio.sleep(0.01)
                    continue
                batch_id, first, last = lease
                out.write(f"lease {target} {batch_id} {first} {last}\n")
                out.flush()
                await asyncio.sleep(rng.uniform(0.005, 0.03))  # processing the records
                await stubs[target].ack(batch_id)
                out.write(f"ack {target} {batch_id}\n")
                out.flush()

        await asyncio.gather(
            committer(),
            *(leaser() for _ in range(LEASERS)),
            *(producer(n) for n in range(PRODUCERS)),
        )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
