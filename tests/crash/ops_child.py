"""Child process of the operations crash test: registers durable calls until it is killed.

Usage: ops_child.py PATH SEED RUN EARLIER. Opens a file-backed Runtime on PATH (real
clock), schedules the named alarm `wake<RUN>` on one worker and prints it, prints
"ready", then runs many concurrent callers that register operations with unique ids on
a few workers (operations and named alarms on one scheduler) and one solo object
(`Durability(context=...)`, its own scheduler). Now and then a caller registers again
an id of an earlier run (the "TARGET ID" lines of the file EARLIER). A caller prints a
new id only after the registration call returned (the acknowledgement), flushed.
Handlers record every delivery in the `LEDGER` object, which also keeps one committed
effect per id and every alarm ring.
"""

from __future__ import annotations

import asyncio
import random
import sys
from typing import Any

from durability import (
    Durability,
    DurabilityAlarms,
    DurabilityScheduler,
    DurableAlarmInfo,
    DurableCall,
    RetryPolicy,
)
from durability.runtime import AlarmInvocationInfo, DurableObject, Runtime

RUNS = 4
WORKERS = 3
CALLERS = 24
ALARM_DELAY_MS = 1_200
WAKE_HOLD_S = 0.4
MAX_ATTEMPTS = RUNS + 2
"""At most one attempt per call is interrupted by each kill, so this never runs out."""


RETRIES = RetryPolicy(max_attempts=MAX_ATTEMPTS, delay=lambda attempt: 100)


class Ledger(DurableObject):
    """The external effect: every (id, attempt) delivery, one effect per id, alarm rings."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS deliveries (id TEXT NOT NULL, attempt INTEGER NOT NULL);"
            "CREATE TABLE IF NOT EXISTS effects (id TEXT PRIMARY KEY, attempt INTEGER NOT NULL);"
            "CREATE TABLE IF NOT EXISTS rings (name TEXT NOT NULL, scheduled_time INTEGER "
            "NOT NULL, attempt INTEGER NOT NULL)"
        )

    async def deliver(self, call_id: str, attempt: int) -> None:
        sql = self.ctx.storage.sql
        sql.exec("INSERT INTO deliveries (id, attempt) VALUES (?, ?)", call_id, attempt)
        sql.exec("INSERT OR IGNORE INTO effects (id, attempt) VALUES (?, ?)", call_id, attempt)

    async def ring(self, name: str, scheduled_time: int, attempt: int) -> None:
        self.ctx.storage.sql.exec(
            "INSERT INTO rings (name, scheduled_time, attempt) VALUES (?, ?, ?)",
            name,
            scheduled_time,
            attempt,
        )

    async def report(self) -> dict[str, list[list[Any]]]:
        tables = {"deliveries": "id, attempt", "effects": "id, attempt", "rings": "*"}
        sql = self.ctx.storage.sql
        return {
            table: [list(row) for row in sql.exec(f"SELECT {columns} FROM {table}").raw()]
            for table, columns in tables.items()
        }


class Calls(DurableObject):
    """Registers `effect` calls and reads their results; subclasses build `durability`."""

    durability: Durability

    async def effect(self, call: DurableCall) -> int:
        await self.env["LEDGER"].get_by_name("ledger").deliver(call.id, call.attempt)
        return call.attempt

    async def register(self, call_id: str) -> None:
        await self.durability.effect(id=call_id, payload={"id": call_id})

    async def results(self, call_ids: list[str]) -> dict[str, list[Any]]:
        """`[status, attempt, result]` of each id."""
        found: dict[str, list[Any]] = {}
        for call_id in call_ids:
            outcome = await self.durability.effect.get_result(call_id)
            found[call_id] = [outcome.status, outcome.attempt, outcome.result]
        return found


class Worker(Calls):
    """Durable operations and named alarms on one shared scheduler."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.scheduler = DurabilityScheduler(context=ctx, alarm_min_delay_ms=1_000)
        self.durability = Durability(
            scheduler=self.scheduler, handlers={"effect": self.effect}, retries=RETRIES
        )
        self.alarms = DurabilityAlarms(
            scheduler=self.scheduler, handlers={f"wake{run}": self.wake for run in range(RUNS)}
        )

    async def wake(self, info: DurableAlarmInfo) -> None:
        ledger = self.env["LEDGER"].get_by_name("ledger")
        await ledger.ring(info.name, info.scheduled_time, info.attempt)
        # Stay running for a while, so that kills often land between ring and completion.
        await asyncio.sleep(WAKE_HOLD_S)

    async def schedule(self, name: str, scheduled_time: int) -> None:
        await self.alarms.named(name)(scheduled_time)

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.scheduler.alarm(info)


class Solo(Calls):
    """Durable operations alone, on the private scheduler `context=` gives them."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.durability = Durability(
            context=ctx,
            handlers={"effect": self.effect},
            retries=RETRIES,
            alarm_min_delay_ms=1_000,
        )

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.durability.alarm(info)


bindings = {"WORKERS": Worker, "SOLO": Solo, "LEDGER": Ledger}


def targets(env: Any) -> list[Any]:
    """The stubs callers register on, by target number: the workers, then the solo."""
    workers = [env.WORKERS.get_by_name(f"worker-{n}") for n in range(WORKERS)]
    return [*workers, env.SOLO.get_by_name("solo")]


def _pairs(path: str) -> list[list[str]]:
    """The "TARGET ID" lines of `path`: ids acknowledged by earlier runs."""
    with open(path) as lines:
        return [line.split(" ") for line in lines.read().splitlines()]


async def main(path: str, seed: int, run: int, earlier_file: str) -> None:
    rng = random.Random(seed)
    earlier = [(int(target), call_id) for target, call_id in _pairs(earlier_file)]
    async with Runtime(path=path, bindings=bindings) as runtime:
        stubs = targets(runtime.env)
        out = sys.stdout
        target = run % WORKERS
        wake_at = runtime.now_ms() + ALARM_DELAY_MS
        await stubs[target].schedule(f"wake{run}", wake_at)
        out.write(f"alarm wake{run} {wake_at}\nready\n")
        out.flush()

        async def caller(number: int) -> None:
            for sequence in range(1_000_000):
                if earlier and rng.random() < 0.2:
                    # Registering an id again, whatever its state, must not run it again.
                    target, call_id = rng.choice(earlier)
                    await stubs[target].register(call_id)
                target = rng.randrange(len(stubs))
                call_id = f"{seed}-{number}-{sequence}"
                await stubs[target].register(call_id)
                out.write(f"op {target} {call_id}\n")
                out.flush()

        await asyncio.gather(*(caller(n) for n in range(CALLERS)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))
