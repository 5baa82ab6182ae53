"""Child process of the mixed-workload crash soak: all capabilities at once until killed.

Usage: mixed_child.py PATH SEED. Opens a file-backed Runtime on PATH (real clock),
prints "ready", then runs concurrent callers against a few objects, each of which
holds durable operations, a named alarm and a log on one scheduler. A caller, at
random: registers an operation; (re)schedules the object's named alarm `tick` a little
ahead; appends a record under a deduplication key drawn from a space shared by every
run; or moves the plain cursor of consumer "c" forward; or leases a range of consumer
"l" and acks it. Each line is printed, flushed, only after its call returned:
"op OBJ ID", "tick OBJ AT", "append OBJ KEY OFFSET", "cursor OBJ OFFSET",
"ack OBJ FIRST LAST". Operation handlers and alarms report to the `LEDGER` object.
"""

from __future__ import annotations

import asyncio
import random
import sys
from typing import Any

from durability import (
    Durability,
    DurabilityAlarms,
    DurabilityLog,
    DurabilityScheduler,
    DurableAlarmInfo,
    DurableCall,
    LogAppendInput,
    LogLeaseOptions,
    RetryPolicy,
)
from durability.runtime import AlarmInvocationInfo, DurableObject, Runtime

OBJECTS = 3
CALLERS = 16
KEYS = 300
TICK_AHEAD_MS = (300, 1_500)
LEASES = LogLeaseOptions(max_parallelism=64, lease_ms=600_000)
"""Leases outlast the soak: a range held at a kill stays held, never redelivered."""
RETRIES = RetryPolicy(max_attempts=1_000, delay=lambda attempt: 100)


class Ledger(DurableObject):
    """The outside world: operation deliveries and alarm rings."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS deliveries (id TEXT NOT NULL, attempt INTEGER NOT NULL);"
            "CREATE TABLE IF NOT EXISTS rings (object TEXT NOT NULL, at INTEGER NOT NULL)"
        )

    async def deliver(self, call_id: str, attempt: int) -> None:
        self.ctx.storage.sql.exec(
            "INSERT INTO deliveries (id, attempt) VALUES (?, ?)", call_id, attempt
        )

    async def ring(self, name: str, at: int) -> None:
        self.ctx.storage.sql.exec("INSERT INTO rings (object, at) VALUES (?, ?)", name, at)

    async def report(self) -> dict[str, list[list[Any]]]:
        sql = self.ctx.storage.sql
        return {
            "deliveries": [
                list(row) for row in sql.exec("SELECT id, attempt FROM deliveries").raw()
            ],
            "rings": [list(row) for row in sql.exec("SELECT object, at FROM rings").raw()],
        }


class Mixed(DurableObject):
    """Operations, a named alarm and a leased log on one scheduler."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.scheduler = DurabilityScheduler(context=ctx)
        self.durability = Durability(
            scheduler=self.scheduler, handlers={"effect": self._effect}, retries=RETRIES
        )
        self.alarms = DurabilityAlarms(
            scheduler=self.scheduler, handlers={"tick": self._tick}, retries=RETRIES
        )
        self.log: DurabilityLog[Any] = DurabilityLog(scheduler=self.scheduler, leases=LEASES)

    def _ledger(self) -> Any:
        return self.env["LEDGER"].get_by_name("ledger")

    async def _effect(self, call: DurableCall) -> None:
        await self._ledger().deliver(call.id, call.attempt)

    async def _tick(self, info: DurableAlarmInfo) -> None:
        await self._ledger().ring(str(self.ctx.id.name), info.scheduled_time)

    async def register(self, call_id: str) -> None:
        await self.durability.effect(id=call_id)

    async def tick_at(self, at: int) -> None:
        await self.alarms.tick(at)

    async def append(self, key: str) -> int:
        result = await self.log.append(LogAppendInput(key, key))
        assert result.value is not None
        return result.value[0]

    async def advance_cursor(self) -> int | None:
        """Move consumer "c" past up to 5 more records; the new cursor (None: nothing)."""
        start = await self.log.cursor("c") or 0
        page = await self.log.read(start, 5)
        if not page.records:
            return None
        await self.log.commit("c", page.next_offset)
        return page.next_offset

    async def lease_and_ack(self) -> list[int] | None:
        lease = await self.log.lease("l", 4)
        if lease is None:
            return None
        await self.log.ack("l", lease.batch_id)
        return [lease.first_offset, lease.last_offset]

    async def state(self, call_ids: list[str]) -> dict[str, Any]:
        """Statuses of `call_ids`, every hot record, the cursor and the lease rows."""
        statuses = {}
        for call_id in call_ids:
            statuses[call_id] = (await self.durability.effect.get_result(call_id)).status
        records, offset = [], 0
        while (page := await self.log.read(offset)).records:
            records += [[r.offset, r.deduplication_key] for r in page.records]
            offset = page.next_offset
        leases = [
            [row.first_offset, row.last_offset, row.state] for row in await self.log.leases("l")
        ]
        return {
            "statuses": statuses,
            "records": records,
            "next_offset": (await self.log.bounds()).next_offset,
            "cursor": await self.log.cursor("c"),
            "leases": leases,
        }

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.scheduler.alarm(info)


bindings = {"MIXED": Mixed, "LEDGER": Ledger}


async def main(path: str, seed: int) -> None:
    rng = random.Random(seed)
    async with Runtime(path=path, bindings=bindings) as runtime:
        objects = [runtime.env.MIXED.get_by_name(f"m{n}") for n in range(OBJECTS)]
        out = sys.stdout
        out.write("ready\n")
        out.flush()

        async def caller(number: int) -> None:
            for sequence in range(1_000_000):
                target = rng.randrange(OBJECTS)
                stub = objects[target]
                roll = rng.random()
                if roll < 0.35:
                    call_id = f"{seed}-{number}-{sequence}"
                    await stub.register(call_id)
                    line = f"op {target} {call_id}"
                elif roll < 0.45:
                    at = runtime.now_ms() + rng.randrange(*TICK_AHEAD_MS)
                    await stub.tick_at(at)
                    line = f"tick {target} {at}"
                elif roll < 0.8:
                    key = f"k{rng.randrange(KEYS)}"
                    line = f"append {target} {key} {await stub.append(key)}"
                elif roll < 0.9:
                    cursor = await stub.advance_cursor()
                    if cursor is None:
                        continue
                    line = f"cursor {target} {cursor}"
                else:
                    acked = await stub.lease_and_ack()
                    if acked is None:
                        continue
                    line = f"ack {target} {acked[0]} {acked[1]}"
                out.write(line + "\n")
                out.flush()

        await asyncio.gather(*(caller(n) for n in range(CALLERS)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
