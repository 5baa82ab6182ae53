"""Workflows under storage faults and eviction: acknowledged instances all complete, each
step's effect happens, and a recorded result is never produced again."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, ClassVar

import pytest

from conftest import MakeRuntime
from durability import Durable, workflow
from durability.runtime import DurableObject
from durability.testing import VirtualClock

from ._inject import StorageFaults

STEPS = ("a", "b", "c")
RETRIES = {"retries": {"limit": 50, "delay": 500, "backoff": "constant"}}


class Jobs(Durable, DurableObject):
    """A workflow of three steps around a sleep and an event wait that times out."""

    scheduler_options: ClassVar[dict[str, Any]] = {"alarm_min_delay_ms": 1_000}

    @workflow
    async def job(self, event: Any, step: Any) -> dict[str, str]:
        effects: list[tuple[str, str, int]] = self.env["EFFECTS"]
        me = event.instance_id

        def effect(name: str, ctx: Any) -> str:
            effects.append((me, name, ctx.attempt))
            return f"{name}:{ctx.attempt}"

        @step.do(config=RETRIES)
        async def a(ctx: Any) -> str:
            return effect("a", ctx)

        @step.do(config=RETRIES)
        async def b(ctx: Any) -> str:
            return effect("b", ctx)

        @step.do(config=RETRIES)
        async def c(ctx: Any) -> str:
            return effect("c", ctx)

        results = {"a": await a()}
        await step.sleep("nap", 1_000)
        results["b"] = await b()
        try:
            await step.wait_for_event("never", "never", timeout=2_000)
        except Exception:
            results["c"] = await c()
        return results

    async def start(self, instance_id: str) -> None:
        await self.job.create(id=instance_id)

    async def outcomes(self) -> dict[str, Any]:
        sql = self.ctx.storage.sql
        rows = sql.exec("SELECT instance_id FROM durability_workflow_instances").raw()
        found = {}
        for (instance_id,) in rows:
            status = await (await self.job.get(instance_id)).status()
            found[instance_id] = [status["status"], status["output"]]
        return found


def _check(outcomes: dict[str, Any], acknowledged: set[str], effects: list[Any]) -> None:
    """Every acknowledged instance is complete with results its steps produced last."""
    assert acknowledged <= outcomes.keys()
    delivered: dict[tuple[str, str], list[int]] = defaultdict(list)
    for instance, step, attempt in effects:
        delivered[(instance, step)].append(attempt)
    for instance, (status, output) in outcomes.items():
        assert status == "complete", (instance, status)
        for step in STEPS:
            kept = int(output[step].split(":")[1])
            attempts = delivered[(instance, step)]
            assert attempts and max(attempts) == kept, (instance, step, attempts, kept)


FAULTS = {
    "object commit": ("JOBS", "COMMIT", 3),
    "set_alarm write": ("JOBS", "INSERT INTO _durability_alarm", 1),
    "catalog write": ("_catalog", "INSERT INTO alarms", 1),
}
"""Which statement fails, in which file, and one matching call in how many."""


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_instances_complete_after_storage_faults_stop(
    tmp_path: Path,
    faults: StorageFaults,
    clock: VirtualClock,
    fault: str,
    make_runtime: MakeRuntime,
) -> None:
    """Writes failing while instances start and run (the object evicted often), then
    failing for 30 s with no call coming in: once the disk heals, every acknowledged
    instance completes."""
    effects: list[Any] = []
    file_part, statement, every = FAULTS[fault]
    acknowledged: set[str] = set()
    async with make_runtime(path=tmp_path, bindings={"JOBS": Jobs, "EFFECTS": effects}) as rt:
        jobs = rt.env.JOBS.get_by_name("j")
        await jobs.outcomes()
        rule = faults.fail(file_part, statement, times=10_000, every=every)
        for index in range(12):
            try:
                await jobs.start(f"i{index}")
                acknowledged.add(f"i{index}")
            except Exception:  # the injected failure, in whatever form it surfaces
                pass
            await clock.advance(400)
            if index % 3 == 2:
                await rt.evict(jobs)
        assert rule.failed >= 2
        faults.stop()
        faults.fail(file_part, statement, times=10_000)
        await clock.advance(30_000)
        faults.stop()
        await rt.evict(jobs)
        await clock.advance(600_000)
        _check(await jobs.outcomes(), acknowledged, effects)


async def test_eviction_between_steps_runs_each_step_once(
    tmp_path: Path, clock: VirtualClock, make_runtime: MakeRuntime
) -> None:
    """Evicted at every moment between steps, instances complete and no step (whose body
    cannot be interrupted) runs twice."""
    effects: list[Any] = []
    async with make_runtime(path=tmp_path, bindings={"JOBS": Jobs, "EFFECTS": effects}) as rt:
        jobs = rt.env.JOBS.get_by_name("j")
        for index in range(5):
            await jobs.start(f"i{index}")
        for _ in range(40):
            await rt.evict(jobs)
            await clock.advance(250)
        await clock.advance(60_000)
        outcomes = await jobs.outcomes()
        _check(outcomes, {f"i{index}" for index in range(5)}, effects)
        assert sorted(effects) == sorted({effect for effect in effects})
        assert len(effects) == 5 * len(STEPS)
