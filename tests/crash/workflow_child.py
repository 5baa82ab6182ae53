"""Child process of the workflows crash test: starts workflow instances until it is killed.

Usage: workflow_child.py PATH SEED. Opens a file-backed Runtime on PATH (real clock),
prints "ready", then runs concurrent callers that start instances of the `job` workflow
on a few objects and send `go` events to instances started before. A caller prints
"wf OBJECT ID" only after `create` returned, and "go OBJECT ID" after the event was
accepted (the acknowledgements), flushed. Every step of `job` records its delivery
(instance, step, attempt) in the `LEDGER` object, the external effect.
"""

from __future__ import annotations

import asyncio
import random
import sys
from typing import Any, ClassVar

from durability import Durable, WorkflowError, workflow
from durability.runtime import DurableObject, Runtime

OBJECTS = 3
CALLERS = 12
RETRIES = {"retries": {"limit": 8, "delay": 50, "backoff": "constant"}, "timeout": "10 seconds"}
"""Each kill interrupts at most one attempt per step, so 9 attempts never run out."""
NAP_MS = 300
WAIT_MS = 1_500
STEPS = ("a", "b", "c", "d", "e")


class Ledger(DurableObject):
    """The external effect: every (instance, step, attempt) a step delivered."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS deliveries (instance TEXT NOT NULL, step TEXT NOT NULL, "
            "attempt INTEGER NOT NULL)"
        )

    async def deliver(self, instance: str, step: str, attempt: int) -> None:
        self.ctx.storage.sql.exec(
            "INSERT INTO deliveries VALUES (?, ?, ?)", instance, step, attempt
        )

    async def report(self) -> list[list[Any]]:
        return [list(row) for row in self.ctx.storage.sql.exec("SELECT * FROM deliveries").raw()]


class Jobs(Durable, DurableObject):
    """The `job` workflow: steps, a sleep, parallel steps, an event wait, a last step."""

    scheduler_options: ClassVar[dict[str, Any]] = {"alarm_min_delay_ms": 1_000}

    @workflow
    async def job(self, event: Any, step: Any) -> Any:
        ledger = self.env["LEDGER"].get_by_name("ledger")
        me = event.instance_id

        async def effect(name: str, ctx: Any) -> str:
            await ledger.deliver(me, name, ctx.attempt)
            return f"{name}:{ctx.attempt}"

        @step.do(config=RETRIES)
        async def a(ctx: Any) -> str:
            return await effect("a", ctx)

        @step.do(config=RETRIES)
        async def b(a: str, ctx: Any) -> list[str]:
            return [a, await effect("b", ctx)]

        @step.do(config=RETRIES)
        async def c(ctx: Any) -> str:
            done = await effect("c", ctx)
            if ctx.attempt == 1:
                raise RuntimeError("c fails its first attempt")
            return done

        @step.do(config=RETRIES)
        async def d(ctx: Any) -> str:
            return await effect("d", ctx)

        @step.do(config=RETRIES, concurrent=True)
        async def e(c: str, d: str, ctx: Any) -> list[str]:
            return [c, d, await effect("e", ctx)]

        first = await b()
        await step.sleep("nap", NAP_MS)
        last = await e()
        try:
            heard = (await step.wait_for_event("go", "go", timeout=WAIT_MS)).payload
        except Exception:
            heard = None
        return {
            "a": first[0],
            "b": first[1],
            "c": last[0],
            "d": last[1],
            "e": last[2],
            "heard": heard,
        }

    async def start(self, instance_id: str) -> None:
        await self.job.create(id=instance_id)

    async def send(self, instance_id: str) -> bool:
        """Send the instance its event; False when it has ended already (its wait timed
        out, or an earlier event was taken), which refuses events as Cloudflare does."""
        instance = await self.job.get(instance_id)
        try:
            await instance.send_event(type="go", payload=instance_id)
        except WorkflowError:
            if (await instance.status())["status"] != "complete":
                raise
            return False
        return True

    async def states(self) -> dict[str, Any]:
        """Every instance of this object: its status."""
        sql = self.ctx.storage.sql
        ids = [
            row[0]
            for row in sql.exec("SELECT instance_id FROM durability_workflow_instances").raw()
        ]
        return {found: dict(await (await self.job.get(found)).status()) for found in ids}


bindings = {"JOBS": Jobs, "LEDGER": Ledger}


def objects(env: Any) -> list[Any]:
    """The stubs instances are started on, by number."""
    return [env.JOBS.get_by_name(f"jobs-{n}") for n in range(OBJECTS)]


async def main(path: str, seed: int) -> None:
    rng = random.Random(seed)
    async with Runtime(path=path, bindings=bindings) as runtime:
        stubs = objects(runtime.env)
        out = sys.stdout
        out.write("ready\n")
        out.flush()
        started: list[tuple[int, str]] = []

        async def caller(number: int) -> None:
            for sequence in range(1_000_000):
                if started and rng.random() < 0.3:
                    target, instance_id = rng.choice(started)
                    if await stubs[target].send(instance_id):
                        out.write(f"go {target} {instance_id}\n")
                        out.flush()
                target = rng.randrange(len(stubs))
                instance_id = f"w{seed}-{number}-{sequence}"
                await stubs[target].start(instance_id)
                started.append((target, instance_id))
                out.write(f"wf {target} {instance_id}\n")
                out.flush()
                await asyncio.sleep(rng.uniform(0, 0.05))

        await asyncio.gather(*(caller(n) for n in range(CALLERS)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
