"""Workflows inside a Durable Object: steps, retries, sleeps, events, replay."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from _workflow_host import lab
from conftest import START_MS
from durability import NonRetryableError, WorkflowStepError, WorkflowTimeoutError, now_ms

on_hosts = pytest.mark.usefixtures("host")
"""On the embedded runtime and on both Cloudflare doubles."""

DAY_MS = 86_400_000


@on_hosts
async def test_steps_run_once_and_replays_read_the_journal() -> None:
    """Each step runs once; a run after eviction answers finished steps from the journal."""

    async def two_steps(obj: Any, event: Any, step: Any) -> Any:
        @step.do("fetch")
        async def fetch() -> dict[str, int]:
            obj.env["WORLD"].note("fetch")
            return {"n": event.payload["n"]}

        @step.do()
        async def double(fetch: dict[str, int]) -> int:
            obj.env["WORLD"].note("double")
            return fetch["n"] * 2

        value = await double()
        await step.sleep("pause", "1 hour")
        return {"value": value, "fetched": (await fetch())["n"]}

    async with lab() as world:
        await world.start(two_steps, n=21)
        await world.clock.advance(0)
        assert (await world.status())["status"] == "waiting"
        await world.runtime.evict(world.stub)
        await world.clock.advance(3_600_000)
        assert await world.status() == {
            "status": "complete",
            "error": None,
            "output": {"value": 42, "fetched": 21},
        }
        assert world.world.labels() == ["fetch", "double"]
        assert await world.steps() == [
            ["do", "fetch", "complete", 1],
            ["do", "double", "complete", 1],
            ["sleep", "pause", "complete", 0],
        ]


@on_hosts
async def test_default_retries_wait_ten_seconds_doubling_then_fail() -> None:
    """Without a config a step is retried 5 times, 10 s apart doubling; then the
    instance is errored with the step's last error."""

    async def flaky(obj: Any, event: Any, step: Any) -> None:
        @step.do("flaky")
        async def attempt(ctx: Any) -> None:
            obj.env["WORLD"].note(ctx.attempt)
            raise RuntimeError(f"attempt {ctx.attempt} failed")

        await attempt()

    async with lab() as world:
        await world.start(flaky)
        await world.clock.advance(700_000)
        times = [at - START_MS for _, at in world.world.log]
        assert world.world.labels() == [1, 2, 3, 4, 5, 6]
        assert times == [0, 10_000, 30_000, 70_000, 150_000, 310_000]
        assert await world.status() == {
            "status": "errored",
            "error": {
                "name": "WorkflowStepError",
                "message": 'step "flaky" failed: RuntimeError: attempt 6 failed',
            },
            "output": None,
        }


async def test_step_config_sets_limit_delay_backoff_and_ctx_shows_it() -> None:
    """A step's config (duration strings or ms) overrides the defaults; `ctx` tells the
    attempt and the resolved config; a caught final failure lets the run go on."""

    async def configured(obj: Any, event: Any, step: Any) -> Any:
        config = {"retries": {"limit": 2, "delay": "1 second", "backoff": "linear"}}

        @step.do("linear", config=config)
        async def linear(ctx: Any) -> None:
            obj.env["WORLD"].note((ctx.attempt, ctx.config.retries.delay, ctx.step.name))
            raise ValueError("no")

        try:
            await linear()
        except WorkflowStepError as error:
            return [type(error).__name__, error.name, error.message, error.step]
        return None

    async with lab() as world:
        await world.start(configured)
        await world.clock.advance(10_000)
        times = [at - START_MS for _, at in world.world.log]
        assert world.world.labels() == [
            (1, "1 second", "linear"),
            (2, "1 second", "linear"),
            (3, "1 second", "linear"),
        ]
        assert times == [0, 1_000, 3_000]
        assert (await world.status())["output"] == [
            "WorkflowStepError",
            "ValueError",
            "no",
            "linear",
        ]


async def test_step_timeout_fails_the_attempt_and_is_retried() -> None:
    """An attempt past its timeout is cancelled and retried; the next one may succeed."""

    async def slow(obj: Any, event: Any, step: Any) -> Any:
        config = {"timeout": 5_000, "retries": {"limit": 1, "delay": 0, "backoff": "constant"}}

        @step.do("slow", config=config)
        async def slow_step(ctx: Any) -> int:
            obj.env["WORLD"].note(ctx.attempt)
            if ctx.attempt == 1:
                await asyncio.sleep(60)
            return ctx.attempt

        return await slow_step()

    async with lab() as world:
        await world.start(slow)
        await world.clock.advance(6_000)
        assert await world.status() == {"status": "complete", "error": None, "output": 2}
        attempts = await world.stub.sql(
            "SELECT attempt, error_name, error_message FROM durability_workflow_steps"
        )
        assert attempts == [[2, "WorkflowTimeoutError", "Execution timed out after 5000ms"]]


@on_hosts
async def test_non_retryable_error_fails_the_instance_at_once() -> None:
    """`NonRetryableError` (ours or `workers.workflows`') ends the step on its first
    attempt, and the instance with it."""
    from workers.workflows import NonRetryableError as CloudflareSpelling

    assert CloudflareSpelling is NonRetryableError

    async def refuse(obj: Any, event: Any, step: Any) -> None:
        @step.do("charge")
        async def charge(ctx: Any) -> None:
            obj.env["WORLD"].note(ctx.attempt)
            raise CloudflareSpelling("card declined")

        await charge()

    async with lab() as world:
        await world.start(refuse)
        await world.clock.advance(60_000)
        assert world.world.labels() == [1]
        assert await world.status() == {
            "status": "errored",
            "error": {"name": "NonRetryableError", "message": "card declined"},
            "output": None,
        }


async def test_dependencies_by_name_by_list_and_concurrently() -> None:
    """Parameters name the steps whose results they take; `depends` lists them in order;
    `concurrent` runs them at once; a step awaited twice runs once."""

    async def graph(obj: Any, event: Any, step: Any) -> Any:
        world = obj.env["WORLD"]

        @step.do("left")
        async def left() -> str:
            world.note("left start")
            await asyncio.sleep(1)
            world.note("left end")
            return "L"

        @step.do("right")
        async def right() -> str:
            world.note("right start")
            await asyncio.sleep(1)
            world.note("right end")
            return "R"

        @step.do("both", concurrent=True)
        async def both(left: str, right: str) -> str:
            return left + right

        @step.do("legacy", depends=[right, left])
        async def legacy(first: str, second: str, ctx: Any) -> str:
            return f"{first}{second}{ctx.attempt}"

        return [await both(), await legacy(), await left()]

    async with lab() as world:
        await world.start(graph)
        await world.clock.advance(2_000)
        assert (await world.status())["output"] == ["LR", "RL1", "L"]
        assert world.world.labels() == ["left start", "right start", "left end", "right end"]


async def test_steps_declared_in_a_loop_take_their_own_parameters() -> None:
    """Steps made in a loop from one function (one code object) each take the results
    their parameters name and `ctx` wherever it stands; a wrapped function's parameters
    are those of the function it wraps."""

    async def looped(obj: Any, event: Any, step: Any) -> Any:
        @step.do("seed")
        def seed() -> int:
            return 1

        def adder(number: int) -> Any:
            @step.do(f"add {number}")
            def add(ctx: Any, seed: int) -> list[Any]:
                return [seed + number, ctx.step.name]

            return add

        shown = [await adder(number)() for number in range(3)]

        def wrapper(*args: Any) -> Any:
            return inner(*args)

        def inner(seed: int, ctx: Any) -> list[Any]:
            return [seed, ctx.attempt]

        wrapper.__wrapped__ = inner  # type: ignore[attr-defined]
        return [shown, await step.do("wrapped")(wrapper)()]

    async with lab() as world:
        await world.start(looped)
        await world.clock.advance(0)
        assert (await world.status())["output"] == [
            [[1, "add 0"], [2, "add 1"], [3, "add 2"]],
            [1, 1],
        ]


async def test_a_parameter_naming_no_step_fails_the_run() -> None:
    """A step parameter that is neither a step's name nor `ctx` is a TypeError."""

    async def wrong(obj: Any, event: Any, step: Any) -> None:
        @step.do("lonely")
        async def lonely(nothing: int) -> int:
            return nothing

        await lonely()

    async with lab() as world:
        await world.start(wrong)
        await world.clock.advance(0)
        status = await world.status()
        assert status["status"] == "errored"
        assert status["error"]["name"] == "TypeError"
        assert "parameter 'nothing' names no step" in status["error"]["message"]


async def test_thirty_days_of_sleep_take_one_virtual_advance() -> None:
    """A 30-day sleep, then `sleep_until` a date: durable, no process waits for either."""

    async def long_sleep(obj: Any, event: Any, step: Any) -> int:
        await step.sleep("month", 30 * DAY_MS)

        @step.do("woke")
        async def woke() -> int:
            obj.env["WORLD"].note("woke")
            return now_ms()

        await woke()
        await step.sleep_until("then", START_MS + 31 * DAY_MS)
        return now_ms()

    async with lab() as world:
        await world.start(long_sleep)
        await world.clock.advance(30 * DAY_MS - 1)
        assert world.world.log == []
        await world.clock.advance(DAY_MS + 1)
        assert world.world.log == [("woke", START_MS + 30 * DAY_MS)]
        assert (await world.status())["output"] == START_MS + 31 * DAY_MS


async def test_sleep_until_the_past_raises_and_bad_durations_are_refused() -> None:
    """`sleep_until` a past time, an unknown unit and a sleep over a year raise ValueError
    in `run`, naming the problem."""

    async def mistakes(obj: Any, event: Any, step: Any) -> list[str]:
        found = []
        for attempt in (
            lambda: step.sleep_until("past", START_MS - 1),
            lambda: step.sleep("unit", "3 fortnights"),
            lambda: step.sleep("long", "366 days"),
            lambda: step.wait_for_event("bad type", "no spaces"),
        ):
            try:
                await attempt()
            except ValueError as error:
                found.append(str(error))
        return found

    async with lab() as world:
        await world.start(mistakes)
        await world.clock.advance(0)
        output = (await world.status())["output"]
        assert len(output) == 4
        assert "is in the past" in output[0]
        assert "unknown unit 'fortnights'" in output[1]
        assert "at most 365 days" in output[2]
        assert "event type 'no spaces'" in output[3]


@on_hosts
async def test_events_sent_early_are_kept_and_waits_time_out() -> None:
    """An event sent before the wait is taken by it; a wait with no event raises
    `WorkflowTimeoutError` at its timeout (24 hours by default)."""

    async def waits(obj: Any, event: Any, step: Any) -> Any:
        await step.sleep("first", "1 hour")
        early = await step.wait_for_event("early", "approved", timeout="1 hour")
        try:
            await step.wait_for_event("never", "rejected")
        except WorkflowTimeoutError as error:
            return [early.payload, early.type, str(error), error.name]
        return None

    async with lab() as world:
        await world.start(waits)
        await world.clock.advance(0)
        await world.stub.send("i1", "approved", {"by": "ann"})
        await world.clock.advance(3_600_000)
        assert (await world.status())["status"] == "waiting"
        await world.clock.advance(DAY_MS - 1)
        assert (await world.status())["status"] == "waiting"
        await world.clock.advance(1)
        assert (await world.status())["output"] == [
            {"by": "ann"},
            "approved",
            "Execution timed out after 86400000ms",
            "WorkflowTimeoutError",
        ]


async def test_an_event_wakes_a_waiting_instance_at_once() -> None:
    """A suspended instance waiting for an event runs as soon as the event is sent."""

    async def approval(obj: Any, event: Any, step: Any) -> Any:
        got = await step.wait_for_event("approval", "approved", timeout="7 days")
        obj.env["WORLD"].note("approved")
        return [got.payload, got.timestamp.timestamp() * 1000]

    async with lab() as world:
        await world.start(approval)
        await world.clock.advance(60_000)
        await world.stub.send("i1", "approved", 7)
        await world.clock.advance(0)
        assert world.world.log == [("approved", START_MS + 60_000)]
        assert (await world.status())["output"] == [7, START_MS + 60_000]


async def test_an_event_reaches_a_live_run_waiting_beside_a_running_step() -> None:
    """While one branch runs a long step, an event wakes the waiting branch in the same run."""

    async def parallel(obj: Any, event: Any, step: Any) -> Any:
        world = obj.env["WORLD"]

        @step.do("long")
        async def long() -> str:
            await asyncio.sleep(60)
            world.note("long done")
            return "done"

        async def waiter() -> Any:
            got = await step.wait_for_event("go", "go")
            world.note("got go")
            return got.payload

        return await asyncio.gather(long(), waiter())

    async with lab() as world:
        await world.start(parallel)
        await world.clock.advance(10_000)
        await world.stub.send("i1", "go", "now")
        await world.clock.advance(0)
        assert world.world.labels() == ["got go"]
        await world.clock.advance(50_000)
        assert (await world.status())["output"] == ["done", "now"]


async def test_a_replay_of_parallel_branches_finds_its_steps_in_any_order() -> None:
    """One branch slept while the other finished its steps: on the replay the first
    branch's new step waits for the other's journal steps instead of failing the run."""

    async def branches(obj: Any, event: Any, step: Any) -> Any:
        world = obj.env["WORLD"]

        def named(name: str) -> Any:
            @step.do(name)
            async def body() -> str:
                world.note(name)
                return name

            return body

        async def first() -> list[str]:
            done = [await named("x1")()]
            await step.sleep("x nap", "10 seconds")
            return [*done, await named("x2")()]

        async def second() -> list[str]:
            return [await named("y1")(), await named("y2")()]

        return await asyncio.gather(first(), second())

    async with lab() as world:
        await world.start(branches)
        await world.clock.advance(10_000)
        assert await world.status() == {
            "status": "complete",
            "error": None,
            "output": [["x1", "x2"], ["y1", "y2"]],
        }
        assert sorted(world.world.labels()) == ["x1", "x2", "y1", "y2"]
