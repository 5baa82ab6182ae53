"""The objects of the mixed-workload crash soak: `Mixed` (every capability on one
scheduler, and poisons) and `Ledger` (the outside world), and their bindings.

Handlers, alarms, fanout targets and the dead-letter queue report their effects to the
`Ledger` object, tagged with the run they fell in (the `RUN` binding), so the parent
can tell a repeat a kill explains (a later run) from one no kill explains (the same
run). A poison records its run there just before it kills its process.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from typing import Any

from durability import (
    AlarmMethodOptions,
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
    MethodOptions,
    RetryPolicy,
    StoredMessage,
    now_ms,
)
from durability.runtime import AlarmInvocationInfo, DurableObject

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
POISON_ATTEMPTS = 2
POISON_RETRIES = RetryPolicy(max_attempts=POISON_ATTEMPTS, delay=lambda attempt: 100)
"""Poisons have few attempts, so each one fails after a few kills; every other item
has `RETRIES`, which no run of kills can exhaust (an item running alone in one object
is charged for a poison killing the process from another: see docs/reliability.md)."""
POISON_DELAY_MS = 200
"""The poison operation and alarm are due this long after they are made, beside the
object's other work."""
POISON_TIMEOUT_MS = 1_000
"""The poison target's attempt timeout: a delivery a kill cut short is due again then.
A poison records its run with the ledger before it kills its process; the timeout must
outlast that call (a commit and sync of another object) on a loaded machine, or the
attempt fails by timing out instead of by the kill."""
DRAIN_TIMEOUT_S = 120.0
"""How long a drain run waits for the poisons to settle: a dead-letter write a kill
interrupted is retried only a minute later."""
DROPPED = "durability.fanout.dead_letter_dropped"


def poison_id(number: int) -> str:
    """The id of poison set `number`'s operation, named alarm and fanout message."""
    return f"poison-{number}"


def poison_set(run: int, every: int) -> int | None:
    """The poison set run `run` brings in (one run in `every`, from the middle of the
    first `every`), or None."""
    return run // every if run % every == every // 2 else None


def poison_sets(run: int, every: int) -> int:
    """How many poison sets runs up to `run` may have brought in."""
    return run // every + 1


TABLES = {
    "deliveries": "id TEXT NOT NULL, attempt INTEGER NOT NULL, run INTEGER NOT NULL",
    "rings": "object TEXT NOT NULL, at INTEGER NOT NULL, run INTEGER NOT NULL",
    "fanned": "id TEXT NOT NULL, attempt INTEGER NOT NULL, run INTEGER NOT NULL",
    "poisoned": "kind TEXT NOT NULL, id TEXT NOT NULL, attempt INTEGER NOT NULL, "
    "run INTEGER NOT NULL",
    "dead": "id TEXT NOT NULL, target TEXT NOT NULL, reason TEXT NOT NULL, error TEXT, "
    "attempts INTEGER NOT NULL, run INTEGER NOT NULL",
}
"""Each table and its columns."""


class Ledger(DurableObject):
    """Records effects as they happen; `report()` returns every row of every table."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec(
            ";".join(f"CREATE TABLE IF NOT EXISTS {name} ({body})" for name, body in TABLES.items())
        )

    def _insert(self, table: str, *values: Any) -> None:
        marks = ", ".join("?" * len(values))
        self.ctx.storage.sql.exec(f"INSERT INTO {table} VALUES ({marks})", *values)

    async def deliver(self, call_id: str, attempt: int, run: int) -> None:
        self._insert("deliveries", call_id, attempt, run)

    async def ring(self, name: str, at: int, run: int) -> None:
        self._insert("rings", name, at, run)

    async def fan(self, deliveries: list[list[Any]], run: int) -> None:
        for message_id, attempt in deliveries:
            self._insert("fanned", message_id, attempt, run)

    async def poisoned(self, kind: str, item: str, attempt: int, run: int) -> None:
        self._insert("poisoned", kind, item, attempt, run)

    async def dead_letter(
        self, message_id: str, target: str, reason: str, error: str | None, attempts: int, run: int
    ) -> None:
        self._insert("dead", message_id, target, reason, error, attempts, run)

    async def report(self) -> dict[str, list[list[Any]]]:
        sql = self.ctx.storage.sql
        return {
            table: [list(row) for row in sql.exec(f"SELECT * FROM {table}").raw()]
            for table in TABLES
        }


class Mixed(DurableObject):
    """Operations, named alarms, a leased log and a fanout on one scheduler, and poisons."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.run: int = env["RUN"]
        self.kill: bool = env["KILL"]
        poisons = [poison_id(number) for number in range(env["POISON_SETS"])]
        self.scheduler = DurabilityScheduler(context=ctx, alarm_min_delay_ms=ALARM_MIN_DELAY_MS)
        self.durability = Durability(
            scheduler=self.scheduler,
            handlers={"effect": self._effect, "poison": self._poison_call},
            retries=RETRIES,
            methods={"poison": MethodOptions(retries=POISON_RETRIES)},
        )
        self.alarms = DurabilityAlarms(
            scheduler=self.scheduler,
            handlers={"tick": self._tick, **dict.fromkeys(poisons, self._poison_ring)},
            retries=RETRIES,
            methods=dict.fromkeys(poisons, AlarmMethodOptions(retries=POISON_RETRIES)),
        )
        self.log: DurabilityLog[Any] = DurabilityLog(scheduler=self.scheduler, leases=LEASES)
        target = FanoutTarget(
            deliver=self._fan, ack_on_return=True, attempt_timeout_ms=FANOUT_ATTEMPT_TIMEOUT_MS
        )
        poison = FanoutTarget(
            deliver=self._poison_fan,
            ack_on_return=True,
            attempt_timeout_ms=POISON_TIMEOUT_MS,
            retries=POISON_RETRIES,
        )
        self.fanout = DurabilityFanout(
            scheduler=self.scheduler,
            targets={"ledger": target, "poison": poison},
            retries=RETRIES,
            dlq=self._dead_letter,
        )

    def _ledger(self) -> Any:
        return self.env["LEDGER"].get_by_name("ledger")

    async def _effect(self, call: DurableCall) -> None:
        await self._ledger().deliver(call.id, call.attempt, self.run)

    async def _tick(self, info: DurableAlarmInfo) -> None:
        await self._ledger().ring(str(self.ctx.id.name), info.scheduled_time, self.run)

    async def _fan(self, messages: Sequence[FanoutMessage[Any]]) -> None:
        deliveries = [[message.id, message.attempt] for message in messages]
        await self._ledger().fan(deliveries, self.run)

    async def _dead_letter(self, stored: StoredMessage[Any]) -> None:
        failure = stored.failure
        assert failure is not None
        error = None if failure.error is None else failure.error.message
        await self._ledger().dead_letter(
            stored.message_id, stored.target, failure.reason, error, stored.attempts, self.run
        )

    async def _poison(self, kind: str, item: str, attempt: int) -> None:
        """Record this run of a poison, then kill the process (in the checking process,
        which must never run one, fail loudly instead)."""
        await self._ledger().poisoned(kind, item, attempt, self.run)
        if self.kill:
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError(f"poison {kind} {item} ran in the checking process")

    async def _poison_call(self, call: DurableCall) -> None:
        await self._poison("op", call.id, call.attempt)

    async def _poison_ring(self, info: DurableAlarmInfo) -> None:
        await self._poison("alarm", info.name, info.attempt)

    async def _poison_fan(self, messages: Sequence[FanoutMessage[Any]]) -> None:
        for message in messages:
            await self._poison("fan", message.id, message.attempt)

    async def enqueue(self, message_id: str) -> None:
        result = await self.fanout.enqueue(FanoutInput(message_id, id=message_id), ["ledger"])
        assert result.success, result.error

    async def backlog(self) -> int:
        return (await self.fanout.load()).outbound.pending_deliveries

    async def register(self, call_id: str) -> None:
        await self.durability.effect(id=call_id)

    async def tick_at(self, at: int) -> None:
        await self.alarms.tick(at)

    async def bring_in_poisons(self, number: int) -> None:
        """Store poison set `number`: its alarm and operation due shortly, its message
        delivered at once (which kills the process, most often before this returns)."""
        item = poison_id(number)
        await self.alarms.named(item)(now_ms() + POISON_DELAY_MS)
        await self.durability.poison(id=item, delay_ms=POISON_DELAY_MS)
        result = await self.fanout.enqueue(FanoutInput(item, id=item), ["poison"])
        assert result.success, result.error

    async def live_poisons(self) -> list[str]:
        """The poisons that may still run here: operations and named alarms pending,
        messages to the poison target not yet delivered or dead-lettered."""
        calls = await self.durability.poison.list(status="pending", limit=1_000)
        live = [f"op {call.id}" for call in calls]
        live += [f"alarm {state.name}" for state in await self.alarms.pending()]
        live = [item for item in live if item != "alarm tick"]
        deliveries = self.ctx.storage.sql.exec(
            "SELECT id FROM durability_fanout_deliveries WHERE target_id = 'poison'"
        ).raw()
        return live + [f"fan {row[0]}" for row in deliveries]

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

    async def state(self, call_ids: list[str], poisons: list[str]) -> dict[str, Any]:
        """Statuses of `call_ids`, every hot record, the cursor, the lease rows, and what
        is left: operations not completed, named alarms pending, the status of alarm `tick`
        (None once it rang), and the outcome of each poison operation and alarm of `poisons`
        (`[status, attempt, error]`, or None if it does not exist)."""
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
        unfinished = [
            f"{call.id} {call.status}"
            for status in ("pending", "failed", "cancelled")
            for call in await self.durability.effect.list(status=status, limit=1_000)
        ]
        poison_ops: dict[str, list[Any] | None] = {}
        poison_alarms: dict[str, list[Any] | None] = {}
        for item in poisons:
            result = await self.durability.poison.get_result(item)
            error = None if result.error is None else result.error.message
            found = result.status != "not_found"
            poison_ops[item] = [result.status, result.attempt, error] if found else None
            alarm = await self.alarms.named(item).get()
            if alarm is None:
                poison_alarms[item] = None
            else:
                error = None if alarm.last_error is None else alarm.last_error.message
                poison_alarms[item] = [alarm.status, alarm.attempt, error]
        return {
            "statuses": statuses,
            "records": records,
            "next_offset": (await self.log.bounds()).next_offset,
            "cursor": await self.log.cursor("c"),
            "leases": leases,
            "unfinished": unfinished,
            "alarms_pending": [state.name for state in await self.alarms.pending()],
            "tick": None if (tick := await self.alarms.tick.get()) is None else tick.status,
            "poison_ops": poison_ops,
            "poison_alarms": poison_alarms,
        }

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.scheduler.alarm(info)


def bindings(run: int, every: int, *, kill: bool) -> dict[str, Any]:
    """The runtime's bindings for run number `run` (the recovery is a run too; `kill`:
    a poison kills the process, else it raises)."""
    return {
        "MIXED": Mixed,
        "LEDGER": Ledger,
        "RUN": run,
        "POISON_SETS": poison_sets(run, every),
        "KILL": kill,
    }
