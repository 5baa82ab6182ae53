"""Child process of the mixed-workload crash soak: all capabilities at once until killed.

Usage: mixed_child.py PATH SEED RUN. Opens a file-backed Runtime on PATH (real clock),
reports each object's committed cursor ("start OBJ CURSOR"), prints "ready", then runs
concurrent callers against a few objects, each of which holds durable operations, a
named alarm, a log and a fanout on one scheduler. A caller draws one of `STEPS` at a
time: register an operation; (re)schedule the object's named alarm `tick` a little
ahead; append a record under a deduplication key drawn from a space shared by every
run; move the plain cursor of consumer "c" forward; lease a range of consumer "l" and
ack it; enqueue a fanout message. A step's line goes to the ledger (stdout, a file the
parent reads), flushed and fsynced, only after its call returned: "op OBJ ID", "tick
OBJ AT", "append OBJ KEY OFFSET", "cursor OBJ OFFSET", "ack OBJ FIRST LAST", "fan OBJ
ID". A new capability joins the soak as one more step here and one more check in
`mixed_soak.py`.

Operation handlers, alarms and the fanout target report their effects to the `LEDGER`
object, tagged with RUN (the `RUN` binding), so the parent can tell a repeat caused by
a kill (a later run) from one that no kill explains (the same run).
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from durability import (
    Durability,
    DurabilityAlarms,
    DurabilityFanout,
    DurabilityLog,
    DurabilityScheduler,
    DurableAlarmInfo,
    DurableCall,
    FanoutInput,
    FanoutMessage,
    FanoutTarget,
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
ALARM_MIN_DELAY_MS = 1_000
"""The shortest fallback alarm, so work a kill interrupted resumes within a second."""
FANOUT_ATTEMPT_TIMEOUT_MS = 5_000
"""A fanout delivery a kill interrupted is claimed until then, and delivered again;
long enough that no delivery times out in a run (its repeat would then need no kill)."""


class Ledger(DurableObject):
    """The outside world: operation deliveries and alarm rings, with the run they fell in."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS deliveries (id TEXT NOT NULL, attempt INTEGER NOT NULL,"
            " run INTEGER NOT NULL);"
            "CREATE TABLE IF NOT EXISTS rings (object TEXT NOT NULL, at INTEGER NOT NULL,"
            " run INTEGER NOT NULL);"
            "CREATE TABLE IF NOT EXISTS fanned (id TEXT NOT NULL, attempt INTEGER NOT NULL,"
            " run INTEGER NOT NULL)"
        )

    async def deliver(self, call_id: str, attempt: int, run: int) -> None:
        self.ctx.storage.sql.exec(
            "INSERT INTO deliveries (id, attempt, run) VALUES (?, ?, ?)", call_id, attempt, run
        )

    async def ring(self, name: str, at: int, run: int) -> None:
        self.ctx.storage.sql.exec(
            "INSERT INTO rings (object, at, run) VALUES (?, ?, ?)", name, at, run
        )

    async def fan(self, deliveries: list[list[Any]], run: int) -> None:
        for message_id, attempt in deliveries:
            self.ctx.storage.sql.exec(
                "INSERT INTO fanned (id, attempt, run) VALUES (?, ?, ?)", message_id, attempt, run
            )

    async def report(self) -> dict[str, list[list[Any]]]:
        sql = self.ctx.storage.sql
        tables = {"deliveries": "id, attempt, run", "rings": "object, at, run"}
        tables["fanned"] = "id, attempt, run"
        return {
            table: [list(row) for row in sql.exec(f"SELECT {columns} FROM {table}").raw()]
            for table, columns in tables.items()
        }


class Mixed(DurableObject):
    """Operations, a named alarm and a leased log on one scheduler."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.scheduler = DurabilityScheduler(context=ctx, alarm_min_delay_ms=ALARM_MIN_DELAY_MS)
        self.durability = Durability(
            scheduler=self.scheduler, handlers={"effect": self._effect}, retries=RETRIES
        )
        self.alarms = DurabilityAlarms(
            scheduler=self.scheduler, handlers={"tick": self._tick}, retries=RETRIES
        )
        self.log: DurabilityLog[Any] = DurabilityLog(scheduler=self.scheduler, leases=LEASES)
        target = FanoutTarget(
            deliver=self._fan, ack_on_return=True, attempt_timeout_ms=FANOUT_ATTEMPT_TIMEOUT_MS
        )
        self.fanout = DurabilityFanout(
            scheduler=self.scheduler, targets={"ledger": target}, retries=RETRIES
        )

    def _ledger(self) -> Any:
        return self.env["LEDGER"].get_by_name("ledger")

    async def _effect(self, call: DurableCall) -> None:
        await self._ledger().deliver(call.id, call.attempt, self.env["RUN"])

    async def _tick(self, info: DurableAlarmInfo) -> None:
        await self._ledger().ring(str(self.ctx.id.name), info.scheduled_time, self.env["RUN"])

    async def _fan(self, messages: list[FanoutMessage[Any]]) -> None:
        deliveries = [[message.id, message.attempt] for message in messages]
        await self._ledger().fan(deliveries, self.env["RUN"])

    async def enqueue(self, message_id: str) -> None:
        result = await self.fanout.enqueue(FanoutInput(message_id, id=message_id))
        assert result.success, result.error

    async def backlog(self) -> int:
        return (await self.fanout.load()).outbound.pending_deliveries

    async def register(self, call_id: str) -> None:
        await self.durability.effect(id=call_id)

    async def tick_at(self, at: int) -> None:
        await self.alarms.tick(at)

    async def append(self, key: str) -> int:
        result = await self.log.append(LogAppendInput(key, key))
        assert result.value is not None
        return result.value[0]

    async def cursor(self) -> int | None:
        return await self.log.cursor("c")

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


def bindings(run: int) -> dict[str, Any]:
    """The runtime's bindings for run number `run` (the recovery is a run too)."""
    return {"MIXED": Mixed, "LEDGER": Ledger, "RUN": run}


@dataclass(frozen=True)
class Draw:
    """What one step works with: the target object, its number, a caller-unique id."""

    stub: Any
    target: int
    unique: str
    rng: random.Random
    now_ms: int


Step = Callable[[Draw], Awaitable[str | None]]
"""One kind of call: makes it and returns its ledger line (None: nothing acknowledged)."""


async def register_operation(draw: Draw) -> str:
    await draw.stub.register(draw.unique)
    return f"op {draw.target} {draw.unique}"


async def reschedule_alarm(draw: Draw) -> str:
    at = draw.now_ms + draw.rng.randrange(*TICK_AHEAD_MS)
    await draw.stub.tick_at(at)
    return f"tick {draw.target} {at}"


async def append_keyed(draw: Draw) -> str:
    key = f"k{draw.rng.randrange(KEYS)}"
    return f"append {draw.target} {key} {await draw.stub.append(key)}"


async def advance_cursor(draw: Draw) -> str | None:
    cursor = await draw.stub.advance_cursor()
    return None if cursor is None else f"cursor {draw.target} {cursor}"


async def lease_and_ack(draw: Draw) -> str | None:
    acked = await draw.stub.lease_and_ack()
    return None if acked is None else f"ack {draw.target} {acked[0]} {acked[1]}"


async def fan_out(draw: Draw) -> str:
    await draw.stub.enqueue(draw.unique)
    return f"fan {draw.target} {draw.unique}"


STEPS: list[tuple[Step, int]] = [
    (register_operation, 35),
    (reschedule_alarm, 10),
    (append_keyed, 35),
    (advance_cursor, 10),
    (lease_and_ack, 10),
    (fan_out, 10),
]
"""Each step and its weight in the draw."""


def record(line: str) -> None:
    """Append `line` to the ledger and make it durable before the caller goes on."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    os.fsync(sys.stdout.fileno())


async def main(path: str, seed: int, run: int) -> None:
    rng = random.Random(seed)
    steps, weights = zip(*STEPS, strict=True)
    async with Runtime(path=path, bindings=bindings(run)) as runtime:
        objects = [runtime.env.MIXED.get_by_name(f"m{n}") for n in range(OBJECTS)]
        for target, stub in enumerate(objects):
            record(f"start {target} {await stub.cursor()}")
        record("ready")

        async def caller(number: int) -> None:
            for sequence in range(1_000_000):
                target = rng.randrange(OBJECTS)
                unique = f"{seed}-{number}-{sequence}"
                draw = Draw(objects[target], target, unique, rng, runtime.now_ms())
                line = await rng.choices(steps, weights)[0](draw)
                if line is not None:
                    record(line)

        await asyncio.gather(*(caller(n) for n in range(CALLERS)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
