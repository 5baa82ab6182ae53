"""A stateful property test of workflows: create, steps, sleep, events, pause, resume,
terminate, eviction and crash, against one file-backed object.

Hypothesis drives instances (each with planned step failures and maybe a wait for an
event), time, events, the control calls, evictions and crashes, and checks after every
step that no answer contradicts the model: an ended instance never changes, nothing
runs for a terminated or paused instance, a step's kept result is its last attempt's
and no step runs before its time. `settle` resumes what is paused and lets a long time
pass: then every instance has ended as its plan says, nothing is stranded.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from conftest import START_MS
from durability import Durable, WorkflowError, now_ms, workflow
from durability.runtime import DurableObject, Runtime
from durability.testing import VirtualClock

pytestmark = pytest.mark.slow

IDS = [f"w{n}" for n in range(5)]
LIMIT = 2
"""Retries per step: a step failing more than this many times errors the instance."""
RETRY_MS = 1_000
NAP_MS = 2_000
WAIT_MS = 5_000
ENDED = ("complete", "errored", "terminated")


class Subject(Durable, DurableObject):
    """`job`: step `a`, a nap, step `b`, maybe a wait for `go`; failures as planned."""

    @workflow
    async def job(self, event: Any, step: Any) -> Any:
        plan = event.payload
        world: World = self.env["WORLD"]
        config = {"retries": {"limit": LIMIT, "delay": RETRY_MS, "backoff": "constant"}}

        def body(name: str, ctx: Any) -> str:
            world.attempts.append((event.instance_id, name, ctx.attempt, now_ms()))
            if ctx.attempt <= plan[f"fail_{name}"]:
                raise RuntimeError(f"planned failure of {name}")
            return f"{name}:{ctx.attempt}"

        @step.do(config=config)
        def a(ctx: Any) -> str:
            return body("a", ctx)

        @step.do(config=config)
        def b(ctx: Any) -> str:
            return body("b", ctx)

        result = {"a": await a()}
        await step.sleep("nap", NAP_MS)
        result["b"] = await b()
        if plan["wait"]:
            try:
                result["go"] = (await step.wait_for_event("go", "go", timeout=WAIT_MS)).payload
            except Exception:
                result["go"] = None
        return result

    async def create(self, instance_id: str, plan: dict[str, Any]) -> None:
        await self.job.create(id=instance_id, params=plan)

    async def act(self, instance_id: str, action: str) -> None:
        await getattr(await self.job.get(instance_id), action)()

    async def send(self, instance_id: str) -> None:
        await (await self.job.get(instance_id)).send_event(type="go", payload=instance_id)

    async def statuses(self) -> dict[str, list[Any]]:
        found = {}
        for instance_id in IDS:
            try:
                status = await (await self.job.get(instance_id)).status()
            except WorkflowError:
                continue
            found[instance_id] = [status["status"], status["output"]]
        return found


class World:
    """What the steps did: `(instance, step, attempt, time)` per attempt."""

    def __init__(self) -> None:
        self.attempts: list[tuple[str, str, int, int]] = []


class WorkflowsModel(RuleBasedStateMachine):
    """The real object in a file-backed runtime beside what it must answer."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.directory = tempfile.TemporaryDirectory()
        self.clock = VirtualClock(START_MS)
        self.world = World()
        self.rt = Runtime(
            path=Path(self.directory.name),
            bindings={"SUBJECT": Subject, "WORLD": self.world},
            clock=self.clock,
        )
        self.run(self.rt.start())
        self.stub = self.rt.env.SUBJECT.get_by_name("s")
        self.plans: dict[str, dict[str, Any]] = {}
        self.seen: dict[str, list[Any]] = {}
        self.terminated: dict[str, int] = {}
        """Terminated instances: how many attempts had run when they were."""
        self.paused: set[str] = set()
        self.frozen: dict[str, int] = {}
        """Instances seen paused: how many attempts had run then (none may run since)."""
        self.sent: set[str] = set()
        self.crashes = 0

    def run(self, awaitable: Any) -> Any:
        return self.loop.run_until_complete(awaitable)

    def teardown(self) -> None:
        try:
            self.run(self.rt.close())
        finally:
            self.loop.close()
            self.directory.cleanup()

    def _attempts(self, instance_id: str) -> int:
        return sum(1 for found, *_ in self.world.attempts if found == instance_id)

    @rule(
        instance_id=st.sampled_from(IDS),
        fail_a=st.integers(0, LIMIT + 1),
        fail_b=st.integers(0, LIMIT),
        wait=st.booleans(),
    )
    def create(self, instance_id: str, fail_a: int, fail_b: int, wait: bool) -> None:
        plan = {"fail_a": fail_a, "fail_b": fail_b, "wait": wait}
        try:
            self.run(self.stub.create(instance_id, plan))
        except WorkflowError:
            assert instance_id in self.plans
            return
        assert instance_id not in self.plans
        self.plans[instance_id] = plan

    @rule(ms=st.sampled_from([1, 500, 1_000, 2_500, 6_000]))
    def advance(self, ms: int) -> None:
        self.run(self.clock.advance(ms))

    @precondition(lambda self: self.plans)
    @rule(data=st.data())
    def send(self, data: st.DataObject) -> None:
        instance_id = data.draw(st.sampled_from(sorted(self.plans)))
        try:
            self.run(self.stub.send(instance_id))
            self.sent.add(instance_id)
        except WorkflowError:
            assert self.seen[instance_id][0] in ENDED

    @precondition(lambda self: self.plans)
    @rule(data=st.data(), action=st.sampled_from(["pause", "resume", "terminate"]))
    def control(self, data: st.DataObject, action: str) -> None:
        instance_id = data.draw(st.sampled_from(sorted(self.plans)))
        try:
            self.run(self.stub.act(instance_id, action))
        except WorkflowError:
            assert action == "terminate" and self.seen[instance_id][0] in ENDED
            return
        if action == "terminate":
            self.terminated.setdefault(instance_id, self._attempts(instance_id))
        elif action == "pause":
            self.paused.add(instance_id)
        else:
            self.paused.discard(instance_id)

    @rule(crash=st.booleans())
    def evict(self, crash: bool) -> None:
        self.crashes += crash
        self.run(self.rt.crash(self.stub) if crash else self.rt.evict(self.stub))

    @rule()
    def settle(self) -> None:
        """Everything resumed and a long time passes: every instance ends as planned."""
        for instance_id in sorted(self.paused):
            self.run(self.stub.act(instance_id, "resume"))
        self.paused.clear()
        self.run(self.clock.advance(120_000))
        for instance_id, (status, output) in self.run(self.stub.statuses()).items():
            plan = self.plans[instance_id]
            if instance_id in self.terminated:
                assert status == "terminated", instance_id
            elif plan["fail_a"] > LIMIT:
                assert status == "errored", instance_id
            else:
                assert status == "complete", (instance_id, status)
                assert int(output["a"].split(":")[1]) > plan["fail_a"]
                if plan["wait"] and output["go"] is not None:
                    assert instance_id in self.sent

    @invariant()
    def answers_never_contradict_the_model(self) -> None:
        statuses = self.run(self.stub.statuses())
        assert statuses.keys() == self.plans.keys()
        for instance_id, (status, output) in statuses.items():
            before = self.seen.get(instance_id)
            if before is not None and before[0] in ENDED:
                assert [status, output] == before, instance_id
            if instance_id in self.terminated:
                assert status == "terminated", instance_id
                assert self._attempts(instance_id) == self.terminated[instance_id], instance_id
            if status == "paused":
                assert instance_id in self.paused
                frozen = self.frozen.setdefault(instance_id, self._attempts(instance_id))
                assert self._attempts(instance_id) == frozen, instance_id
            else:
                self.frozen.pop(instance_id, None)
            self.seen[instance_id] = [status, output]
            if status == "complete":
                attempts: dict[str, list[int]] = defaultdict(list)
                for found, name, attempt, _ in self.world.attempts:
                    if found == instance_id:
                        attempts[name].append(attempt)
                for name in ("a", "b"):
                    assert int(output[name].split(":")[1]) == max(attempts[name])
        last_a: dict[str, int] = {}
        for instance_id, name, attempt, at in self.world.attempts:
            # A crash can cut one attempt short, which then counts too.
            assert attempt <= LIMIT + 1 + self.crashes, (instance_id, name, attempt)
            if name == "a":
                last_a[instance_id] = at
            else:
                assert at >= last_a[instance_id] + NAP_MS, (instance_id, "b before the nap ended")


WorkflowsModel.TestCase.settings = settings(
    max_examples=30,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestWorkflowsModel = WorkflowsModel.TestCase
