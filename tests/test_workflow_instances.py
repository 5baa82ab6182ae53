"""The instance API of workflows in an object: ids, batches, pause, resume, terminate,
restart, events, and the rules that keep replays from misreading the journal."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from _workflow_host import Flows, World, lab
from conftest import START_MS, MakeRuntime
from durability import Durable, DurableCall, WorkflowError, operation, workflow
from durability.runtime import DurableObject
from durability.testing import VirtualClock

HOUR_MS = 3_600_000


async def one_step_then_sleep(obj: Any, event: Any, step: Any) -> Any:
    """A step, then an hour of sleep, then another step."""

    @step.do("first")
    async def first() -> int:
        obj.env["WORLD"].note("first")
        return 1

    await first()
    await step.sleep("rest", "1 hour")

    @step.do("second")
    async def second() -> int:
        obj.env["WORLD"].note("second")
        return 2

    return await second()


async def test_ids_are_checked_unique_and_generated_when_missing() -> None:
    """A bad id is refused, a reused id is an error, a missing id is a fresh UUID, and
    `get` of an unknown id raises `WorkflowError`."""
    async with lab() as world:
        world.world.scripts["one_step_then_sleep"] = one_step_then_sleep
        for bad in ("-leading-dash", "has space", "x" * 101, ""):
            with pytest.raises(WorkflowError, match="invalid workflow instance id"):
                await world.stub.create(bad, "one_step_then_sleep")
        await world.stub.create("order-1", "one_step_then_sleep")
        with pytest.raises(WorkflowError, match='already has an instance "order-1"'):
            await world.stub.create("order-1", "one_step_then_sleep")
        generated = await world.stub.create(None, "one_step_then_sleep")
        assert len(generated) == 36 and generated.count("-") == 4
        with pytest.raises(WorkflowError, match='has no instance "nope"'):
            await world.stub.status("nope")


class Batches(Flows):
    """`Flows` with a batch call."""

    async def batch(self, items: list[dict[str, Any]]) -> list[str]:
        return [instance.id for instance in await self.flow.create_batch(items)]


async def test_create_batch_keeps_existing_ids_and_checks_its_size(
    make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """`create_batch` starts up to 100 instances, leaves ids that exist alone, and refuses
    an empty or oversized batch."""
    world = World(scripts={"one_step_then_sleep": one_step_then_sleep})
    async with make_runtime(bindings={"FLOWS": Batches, "WORLD": world}) as rt:
        stub = rt.env.FLOWS.get_by_name("b")
        script = {"script": "one_step_then_sleep"}
        await stub.create("a", "one_step_then_sleep")
        ids = await stub.batch([{"id": "a", "params": script}, {"id": "b", "params": script}])
        assert ids == ["a", "b"]
        await clock.advance(0)
        assert world.labels() == ["first", "first"]
        with pytest.raises(WorkflowError, match="at least 1 instance"):
            await stub.batch([])
        with pytest.raises(WorkflowError, match="at most 100 instances, got 101"):
            await stub.batch([{"params": script}] * 101)


async def test_pause_waits_for_running_steps_and_resume_keeps_the_remaining_sleep() -> None:
    """Pausing a running step shows `waitingForPause` until it ends; paused, nothing runs;
    resumed, the sleep keeps the time it had left."""

    async def slow_then_sleep(obj: Any, event: Any, step: Any) -> Any:
        @step.do("slow")
        async def slow() -> None:
            await asyncio.sleep(10)
            obj.env["WORLD"].note("slow done")

        await slow()
        await step.sleep("rest", "1 hour")

        @step.do("after")
        async def after() -> None:
            obj.env["WORLD"].note("after")

        await after()

    async with lab() as world:
        await world.start(slow_then_sleep)
        await world.clock.advance(5_000)
        await world.stub.act("i1", "pause")
        assert (await world.status())["status"] == "waitingForPause"
        await world.clock.advance(5_000)
        assert (await world.status())["status"] == "paused"
        await world.clock.advance(3 * HOUR_MS)
        assert world.world.labels() == ["slow done"]
        await world.stub.act("i1", "resume")
        await world.clock.advance(HOUR_MS - 1)
        assert world.world.labels() == ["slow done"]
        await world.clock.advance(1)
        assert world.world.labels() == ["slow done", "after"]
        assert (await world.status())["status"] == "complete"


async def test_a_pause_not_yet_taken_can_be_taken_back() -> None:
    """Resume during `waitingForPause` cancels the pause: the run goes on."""

    async def slow(obj: Any, event: Any, step: Any) -> str:
        @step.do("slow")
        async def slow_step() -> str:
            await asyncio.sleep(10)
            return "ok"

        return await slow_step()

    async with lab() as world:
        await world.start(slow)
        await world.clock.advance(1_000)
        await world.stub.act("i1", "pause")
        await world.stub.act("i1", "resume")
        assert (await world.status())["status"] == "running"
        await world.clock.advance(10_000)
        assert (await world.status())["output"] == "ok"


async def test_terminate_stops_an_instance_and_refuses_a_finished_one() -> None:
    """A terminated instance never runs again; terminating it (or any ended one) again
    raises; an ended instance takes no events."""
    async with lab() as world:
        await world.start(one_step_then_sleep)
        await world.clock.advance(0)
        await world.stub.act("i1", "terminate")
        assert await world.status() == {"status": "terminated", "error": None, "output": None}
        await world.clock.advance(2 * HOUR_MS)
        assert world.world.labels() == ["first"]
        with pytest.raises(WorkflowError, match="already terminated"):
            await world.stub.act("i1", "terminate")
        with pytest.raises(WorkflowError, match="takes no more events"):
            await world.stub.send("i1", "late")


async def test_terminate_stops_a_step_that_is_running() -> None:
    """Terminating an instance whose step runs cancels the step; nothing is written after."""

    async def long(obj: Any, event: Any, step: Any) -> None:
        @step.do("long")
        async def long_step() -> None:
            await asyncio.sleep(100)
            obj.env["WORLD"].note("finished")

        await long_step()

    async with lab() as world:
        await world.start(long)
        await world.clock.advance(10_000)
        await world.stub.act("i1", "terminate")
        await world.clock.advance(100_000)
        assert world.world.labels() == []
        assert (await world.status())["status"] == "terminated"
        assert await world.steps() == [["do", "long", "running", 1]]


async def test_restart_runs_the_instance_from_its_first_step() -> None:
    """`restart` drops the journal and runs everything again with the same params."""
    async with lab() as world:
        await world.start(one_step_then_sleep)
        await world.clock.advance(2 * HOUR_MS)
        assert (await world.status())["output"] == 2
        await world.stub.act("i1", "restart")
        await world.clock.advance(0)
        assert (await world.status())["status"] == "waiting"
        await world.clock.advance(HOUR_MS)
        assert world.world.labels() == ["first", "second", "first", "second"]
        assert (await world.status())["output"] == 2


async def test_a_step_name_used_twice_in_one_run_errors_the_instance() -> None:
    """Two steps of one name in one run cannot both be answered from the journal."""

    async def twice(obj: Any, event: Any, step: Any) -> None:
        for _ in range(2):

            @step.do("same")
            async def same() -> int:
                return 1

            await same()

    async with lab() as world:
        await world.start(twice)
        await world.clock.advance(0)
        status = await world.status()
        assert status["status"] == "errored"
        assert status["error"]["name"] == "WorkflowDeterminismError"
        assert 'step name "same" is used twice in one run' in status["error"]["message"]


async def test_new_steps_before_unreached_journal_steps_error_the_instance() -> None:
    """A run whose code changed (a step renamed while the instance slept) stops with a
    clear error instead of running the renamed step again."""
    versions = {"name": "charge"}

    async def changing(obj: Any, event: Any, step: Any) -> str:
        @step.do(versions["name"])
        async def charge() -> str:
            obj.env["WORLD"].note(versions["name"])
            return "charged"

        await charge()
        await step.sleep("rest", "1 hour")
        return "done"

    async with lab() as world:
        await world.start(changing)
        await world.clock.advance(0)
        versions["name"] = "charge card"
        await world.clock.advance(HOUR_MS)
        status = await world.status()
        assert world.world.labels() == ["charge"]
        assert status["status"] == "errored"
        assert status["error"]["name"] == "WorkflowDeterminismError"
        assert 'never reached (do "charge", sleep "rest")' in status["error"]["message"]


async def test_results_that_are_not_json_error_the_instance() -> None:
    """A step or a run returning something that is not JSON errors the instance."""

    async def bad_step(obj: Any, event: Any, step: Any) -> None:
        @step.do("date")
        async def date() -> object:
            return object()

        await date()

    async def bad_output(obj: Any, event: Any, step: Any) -> object:
        return {1, 2}

    async with lab() as world:
        await world.start(bad_step, id="step")
        await world.start(bad_output, id="output")
        await world.clock.advance(0)
        step_status, output_status = await world.status("step"), await world.status("output")
        assert step_status["error"]["name"] == "TypeError"
        assert 'the result of step "date" must be a JSON value' in step_status["error"]["message"]
        assert output_status["error"]["name"] == "TypeError"
        assert (
            "the output of the workflow's run must be a JSON value"
            in output_status["error"]["message"]
        )


async def test_a_plain_step_commits_its_writes_with_its_result() -> None:
    """A plain (not async) step runs in the transaction of its result: a failed attempt
    leaves none of its writes, a successful one all of them."""

    async def ledger(obj: Any, event: Any, step: Any) -> Any:
        sql = obj.ctx.storage.sql
        sql.exec("CREATE TABLE IF NOT EXISTS entries (attempt INTEGER)")
        config = {"retries": {"limit": 1, "delay": 0, "backoff": "constant"}}

        @step.do("write", config=config)
        def write(ctx: Any) -> int:
            sql.exec("INSERT INTO entries VALUES (?)", ctx.attempt)
            if ctx.attempt == 1:
                raise RuntimeError("after the write")
            return ctx.attempt

        await write()
        return [row["attempt"] for row in sql.exec("SELECT attempt FROM entries")]

    async with lab() as world:
        await world.start(ledger)
        await world.clock.advance(0)
        assert (await world.status())["output"] == [2]


async def test_a_suspended_instance_holds_no_task_and_no_permit() -> None:
    """Sleeping, the object has no task running and every permit free; it may be evicted."""
    async with lab() as world:
        await world.start(one_step_then_sleep)
        await world.clock.advance(1_000)
        instance = world.runtime._live.get(("FLOWS", str(world.stub.id)))
        assert instance is not None
        assert not instance.tasks
        free, size = await world.stub.free_permits()
        assert free == size
        due = await world.stub.sql(
            "SELECT next_attempt_at, state FROM durability_workflow_instances"
        )
        assert due == [[START_MS + HOUR_MS, "waiting"]]


class Mixed(Durable, DurableObject):
    """An object with an operation and a workflow on its one scheduler."""

    @operation
    async def notify(self, call: DurableCall) -> str:
        self.env["WORLD"].note(("notified", call.id))
        return call.id

    @workflow
    async def onboard(self, event: Any, step: Any) -> str:
        @step.do()
        async def register() -> str:
            await self.notify(f"welcome-{event.instance_id}", {})
            return "registered"

        return str(await register())

    async def start(self, user: str) -> None:
        await self.onboard.create(id=user)

    async def status(self, user: str) -> dict[str, Any]:
        return dict(await (await self.onboard.get(user)).status())


async def test_workflows_share_the_object_scheduler_with_operations(
    make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """A `Durable` class may declare operations and workflows: one scheduler runs both,
    and a step may register an operation."""
    world = World()
    async with make_runtime(bindings={"MIXED": Mixed, "WORLD": world}) as rt:
        stub = rt.env.MIXED.get_by_name("m")
        await stub.start("ann")
        await clock.advance(1_000)
        assert (await stub.status("ann"))["output"] == "registered"
        assert world.labels() == [("notified", "welcome-ann")]


def test_reserved_workflow_names_are_refused() -> None:
    """A `@workflow` named like the helper's own names or `Durable`'s raises at class
    definition."""
    for name in ("workflows", "alarm", "names"):
        with pytest.raises(ValueError, match="is reserved by"):
            type(name.title(), (Durable, DurableObject), {name: workflow(one_step_then_sleep)})
