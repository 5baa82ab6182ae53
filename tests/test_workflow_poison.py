"""Poison isolation for workflow steps, in process: a run cut short by an eviction makes
its instance a suspect, run again alone, and the step attempt it cut short counts only
if that run ran alone (the SIGKILL version is in tests/crash/test_poison_sigkill.py)."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from _workflow_host import Flows, World
from durability import WorkflowEvent, WorkflowStep
from durability.runtime import Runtime
from durability.testing import VirtualClock, crash_point

ONE_ATTEMPT = {"retries": {"limit": 0, "delay": 1_000, "backoff": "constant"}}
"""A step with no retry: an attempt that counts and fails ends it."""


class LoneFlows(Flows):
    """`Flows` on a scheduler of one permit: every run runs alone."""

    scheduler_options: ClassVar[dict[str, Any]] = {"alarm_concurrency": 1}


def blocked_once(gate: asyncio.Event) -> Any:
    """A script of one step (one attempt allowed) that notes each attempt with the free
    permits it saw, and waits for `gate` on its first attempt."""

    async def script(obj: Flows, event: WorkflowEvent, step: WorkflowStep) -> str:
        world: World = obj.env["WORLD"]

        @step.do("work", config=ONE_ATTEMPT)
        async def work(ctx: Any) -> str:
            world.note((event.instance_id, ctx.attempt, obj.free_permits()[0]))
            if ctx.attempt == 1:
                await gate.wait()
            return "done"

        return str(await work())

    return script


async def _steps(stub: Any) -> list[list[Any]]:
    rows: list[list[Any]] = await stub.sql(
        "SELECT instance_key, attempt, interruptions, spared FROM durability_workflow_steps "
        "ORDER BY instance_key"
    )
    return rows


async def test_runs_evicted_beside_others_run_again_alone_and_keep_their_attempts() -> None:
    """Two instances evicted mid-step (their runs beside each other): each runs again
    alone (every permit held), its cut-short attempt spared, and completes though its
    step has no retry."""
    world, clock, gate = World(), VirtualClock(), asyncio.Event()
    world.scripts["blocked"] = blocked_once(gate)
    async with Runtime(bindings={"FLOWS": Flows, "WORLD": world}, clock=clock) as rt:
        stub = rt.env.FLOWS.get_by_name("flows")
        for id in ("a", "b"):
            await stub.create(id, "blocked")
        await clock.advance(0)
        await rt.evict(stub)
        gate.set()
        await clock.advance(60_000)
        assert [(await stub.status(id))["status"] for id in ("a", "b")] == ["complete"] * 2
        # (instance, attempt) -> the permits free while it ran: none once alone.
        free = {(id, attempt): permits for id, attempt, permits in world.labels()}
        assert sorted(free) == [("a", 1), ("a", 2), ("b", 1), ("b", 2)]
        assert free[("a", 1)] > 0 and free[("b", 1)] > 0
        assert free[("a", 2)] == free[("b", 2)] == 0
        assert await _steps(stub) == [["flow:a", 2, 1, 1], ["flow:b", 2, 1, 1]]


async def test_a_step_cut_short_while_it_ran_alone_spends_its_attempt() -> None:
    """On a scheduler of one permit every run is alone: a step evicted mid-attempt has
    spent it, and with no retry left the instance errors, the error counting the
    interruption."""
    world, clock, gate = World(), VirtualClock(), asyncio.Event()
    world.scripts["blocked"] = blocked_once(gate)
    async with Runtime(bindings={"FLOWS": LoneFlows, "WORLD": world}, clock=clock) as rt:
        stub = rt.env.FLOWS.get_by_name("flows")
        await stub.create("a", "blocked")
        await clock.advance(0)
        await rt.evict(stub)
        gate.set()
        await clock.advance(60_000)
        status = await stub.status("a")
        assert world.labels() == [("a", 1, 0)]
        assert status["status"] == "errored"
        assert status["error"]["name"] == "WorkflowStepError"
        assert "exhausted its 1 attempts (1 interrupted" in status["error"]["message"]
        assert await _steps(stub) == [["flow:a", 1, 1, 0]]


def crashing(gate: asyncio.Event) -> Any:
    """A script that, once `gate` is set, crashes its object outside any step, on every
    run."""

    async def script(obj: Flows, event: WorkflowEvent, step: WorkflowStep) -> str:
        await gate.wait()
        await crash_point()

    return script


async def test_an_instance_crashing_outside_its_steps_leaves_the_others_their_turns() -> None:
    """An instance whose code crashes its object outside any step, ahead of two others
    in due order: each crash makes all three suspects, but the crashing one goes behind
    the others, which run again alone and complete; it alone stays unfinished."""
    world, clock = World(), VirtualClock()
    blocked, armed = asyncio.Event(), asyncio.Event()
    world.scripts["blocked"] = blocked_once(blocked)
    world.scripts["crashing"] = crashing(armed)
    async with Runtime(bindings={"FLOWS": Flows, "WORLD": world}, clock=clock) as rt:
        stub = rt.env.FLOWS.get_by_name("flows")
        await stub.create("p", "crashing")
        for id in ("a", "b"):
            await stub.create(id, "blocked")
        await clock.advance(0)
        armed.set()
        blocked.set()
        await clock.advance(60_000)
        states = {id: (await stub.status(id))["status"] for id in ("a", "b", "p")}
        assert states == {"a": "complete", "b": "complete", "p": "running"}
        assert await _steps(stub) == [["flow:a", 2, 1, 1], ["flow:b", 2, 1, 1]]
