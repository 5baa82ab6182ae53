"""Child process of the poison tests: one item among many kills its process when it runs.

Usage: poison_child.py PATH EXECUTOR START_MS. Opens a file-backed Runtime on PATH, on a
virtual clock at START_MS. On its first run it schedules `ITEMS` items on one object,
all due at once, item `POISON` among them: durable operations (`EXECUTOR` =
``operations``, or ``operations-queued``: registered in reverse, so the poison waits for
a permit behind its claim), named alarms (``alarms``), fanout messages to one target
(``fanout``, with a dead-letter queue) or workflow instances of one step
(``workflows``). Every handler (or step) records its run in the `LEDGER` object; the
poison's SIGKILLs the process instead. The child prints "ready", then waits until every
item is settled (moving the clock on a second at a time, so the host alarm's backoff
after each kill costs no real time) and prints, for each, its final state, then "done".
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from durability import (
    Durability,
    DurabilityAlarms,
    DurabilityFanout,
    DurabilityScheduler,
    DurabilityWorkflows,
    DurableAlarmInfo,
    DurableCall,
    FanoutInput,
    FanoutMessage,
    FanoutTarget,
    RetryPolicy,
    StoredMessage,
    WorkflowEvent,
    WorkflowStep,
    now_ms,
)
from durability.runtime import AlarmInvocationInfo, DurableObject, Runtime
from durability.testing import VirtualClock

ITEMS = 20
POISON = 7
MAX_ATTEMPTS = 3
FANOUT_LEASE_MS = 200
"""The fanout's attempt timeout: a delivery cut off by a kill is due again after it."""
WAIT_MS = 600_000
STEP_MS = 1_000


def name_of(number: int) -> str:
    return f"item{number:02}"


class Ledger(DurableObject):
    """Every run of an innocent item (name, attempt)."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS runs (name TEXT NOT NULL, attempt INTEGER NOT NULL);"
            "CREATE TABLE IF NOT EXISTS dead (name TEXT NOT NULL, reason TEXT NOT NULL, "
            "error TEXT, attempts INTEGER NOT NULL)"
        )

    async def ran(self, name: str, attempt: int) -> None:
        self.ctx.storage.sql.exec("INSERT INTO runs VALUES (?, ?)", name, attempt)

    async def dead_lettered(self, name: str, reason: str, error: str | None, attempts: int) -> None:
        self.ctx.storage.sql.exec(
            "INSERT INTO dead VALUES (?, ?, ?, ?)", name, reason, error, attempts
        )

    async def runs(self) -> list[list[Any]]:
        return [list(row) for row in self.ctx.storage.sql.exec("SELECT * FROM runs").raw()]

    async def dead(self) -> dict[str, list[Any]]:
        rows = self.ctx.storage.sql.exec("SELECT * FROM dead").raw()
        return {str(row[0]): list(row[1:]) for row in rows}


class Items(DurableObject):
    """The items: operations and named alarms on one scheduler."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        retries = RetryPolicy(max_attempts=MAX_ATTEMPTS, delay=lambda attempt: 50)
        self.scheduler = DurabilityScheduler(context=ctx, alarm_min_delay_ms=1_000)
        names = [name_of(number) for number in range(ITEMS)]
        self.durability = Durability(
            scheduler=self.scheduler, handlers={"work": self.work}, retries=retries
        )
        self.alarms = DurabilityAlarms(
            scheduler=self.scheduler, handlers=dict.fromkeys(names, self.ring), retries=retries
        )
        self.fanout: DurabilityFanout[str] = DurabilityFanout(
            scheduler=self.scheduler,
            targets={"t": FanoutTarget(deliver=self.deliver, ack_on_return=True)},
            retries=retries,
            attempt_timeout_ms=FANOUT_LEASE_MS,
            dlq=self.dead_letter,
        )
        self.workflows = DurabilityWorkflows(scheduler=self.scheduler, workflows={"job": self.job})

    async def _run(self, name: str, attempt: int) -> None:
        if name == name_of(POISON):
            os.kill(os.getpid(), signal.SIGKILL)
        await self.env["LEDGER"].get_by_name("ledger").ran(name, attempt)

    async def work(self, call: DurableCall) -> None:
        await self._run(call.id, call.attempt)

    async def ring(self, info: DurableAlarmInfo) -> None:
        await self._run(info.name, info.attempt)

    async def deliver(self, messages: Sequence[FanoutMessage[str]]) -> None:
        for message in messages:
            await self._run(message.id, message.attempt)

    async def job(self, event: WorkflowEvent, step: WorkflowStep) -> None:
        config = {"retries": {"limit": MAX_ATTEMPTS - 1, "delay": 50, "backoff": "constant"}}

        @step.do("work", config=config)
        async def work(ctx: Any) -> None:
            await self._run(event.instance_id, ctx.attempt)

        await work()

    async def dead_letter(self, stored: StoredMessage[str]) -> None:
        failure = stored.failure
        assert failure is not None
        error = None if failure.error is None else failure.error.message
        ledger = self.env["LEDGER"].get_by_name("ledger")
        await ledger.dead_lettered(stored.message_id, failure.reason, error, stored.attempts)

    async def schedule(self, executor: str) -> None:
        if self.ctx.storage.sql.exec(
            "SELECT count(*) AS n FROM sqlite_master WHERE name = 'scheduled'"
        ).one()["n"]:
            return
        self.ctx.storage.sql.exec("CREATE TABLE scheduled (done INTEGER)")
        names = [name_of(number) for number in range(ITEMS)]
        if executor == "operations-queued":
            # Registered last first: the poison is past the free permits, so its first
            # run is under the claim the registration's commit made ahead of a permit.
            await asyncio.gather(*(self.durability.work(name) for name in reversed(names)))
        elif executor == "operations":
            await asyncio.gather(*(self.durability.work(name) for name in names))
        elif executor == "fanout":
            await self.fanout.enqueue([FanoutInput(body=name, id=name) for name in names])
        elif executor == "workflows":
            await self.workflows.job.create_batch([{"id": name} for name in names])
        else:
            due = now_ms()
            await asyncio.gather(*(self.alarms.named(name)(due) for name in names))

    async def states(self, executor: str) -> dict[str, list[Any]]:
        """`[status, attempt, error message]` of each item (a run-alarm that is gone:
        completed)."""
        found: dict[str, list[Any]] = {}
        if executor == "fanout":
            pending = {
                str(row[0])
                for row in self.ctx.storage.sql.exec(
                    "SELECT m.id FROM durability_fanout_deliveries AS d "
                    "JOIN durability_fanout_messages AS m ON m.key = d.message_key"
                ).raw()
            }
            dead = await self.env["LEDGER"].get_by_name("ledger").dead()
            for number in range(ITEMS):
                name = name_of(number)
                if name in pending:
                    found[name] = ["pending", None, None]
                elif name in dead:
                    reason, error, attempts = dead[name]
                    found[name] = [f"failed:{reason}", attempts, error]
                else:
                    found[name] = ["completed", None, None]
            return found
        if executor == "workflows":
            return self._instance_states()
        for number in range(ITEMS):
            name = name_of(number)
            if executor.startswith("operations"):
                result = await self.durability.work.get_result(name)
                error = None if result.error is None else result.error.message
                found[name] = [result.status, result.attempt, error]
            else:
                state = await self.alarms.named(name).get()
                if state is None:
                    found[name] = ["completed", None, None]
                else:
                    error = None if state.last_error is None else state.last_error.message
                    found[name] = [state.status, state.attempt, error]
        return found

    def _instance_states(self) -> dict[str, list[Any]]:
        """`[status, attempts of its step, error message]` of each workflow instance."""
        found: dict[str, list[Any]] = {}
        rows = self.ctx.storage.sql.exec(
            "SELECT i.instance_id, i.state, i.error_message, s.attempt "
            "FROM durability_workflow_instances AS i LEFT JOIN durability_workflow_steps AS s "
            "ON s.instance_key = i.instance_key AND s.name = 'work'"
        ).raw()
        for name, state, error, attempt in rows:
            status = {"complete": "completed", "errored": "failed"}.get(str(state), "pending")
            found[str(name)] = [status, attempt, error]
        return found

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.scheduler.alarm(info)


async def main(path: str, executor: str, start_ms: int) -> None:
    clock = VirtualClock(start_ms)
    bindings = {"ITEMS": Items, "LEDGER": Ledger}
    async with Runtime(path=path, bindings=bindings, clock=clock) as runtime:
        items = runtime.env.ITEMS.get_by_name("items")
        await items.schedule(executor)
        print("ready", flush=True)
        deadline = clock.now_ms() + WAIT_MS
        while True:
            states = await items.states(executor)
            if all(state[0] not in ("pending", "running") for state in states.values()):
                break
            if clock.now_ms() > deadline:
                break
            await clock.advance(STEP_MS)
        ledger = await runtime.env.LEDGER.get_by_name("ledger").runs()
        for name, state in sorted(states.items()):
            print("state", name, *state, sep="\t", flush=True)
        for name, attempt in ledger:
            print("ran", name, attempt, sep="\t", flush=True)
        print("done", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
