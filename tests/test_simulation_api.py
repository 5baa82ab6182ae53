"""`durability.testing.Simulation`: seeded runs under faults that replay exactly, failures
shrunk to a short trace with the command that replays them, and every kind of fault."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from durability import Durable, DurableCall, now_ms, operation
from durability.runtime import DurableObject
from durability.testing import (
    FaultRates,
    Simulation,
    SimulationFailure,
    SimulationRun,
    effects_at_least_once,
    nothing_stranded,
)

QUIET = FaultRates(
    crash_before_commit=0,
    crash_after_commit=0,
    fail_commit=0,
    crash_at_await=0,
    slow_outside=0,
    fail_outside=0,
    crash_at_outside=0,
    evict=0,
    late_alarm=0,
    fail_set_alarm=0,
    fail_cold_store=0,
)
"""No faults at all: the points are still counted."""


class Mailer:
    """A fake mail service: records each message in the run's ledger."""

    def __init__(self, run: SimulationRun) -> None:
        self.run = run

    async def send(self, key: str, to: str) -> None:
        await asyncio.sleep(0.01)  # a round trip: the caller waits here
        self.run.ledger.record(key, subject=to)


class Outbox(Durable, DurableObject):
    """Sends each welcome mail as a durable operation keyed by the recipient."""

    @operation
    async def deliver(self, call: DurableCall[dict[str, str]]) -> None:
        await self.env.MAILER.send(call.idempotency_key, call.payload["to"])

    async def welcome(self, to: str) -> None:
        await self.deliver(f"welcome:{to}", {"to": to})


async def welcomes(run: SimulationRun) -> None:
    """Welcomes one of three people per step, with time passing in between."""
    for _ in run.steps():
        person = run.rng.choice(["ann", "bob", "cid"])
        await run.call(run.env.OUTBOX.get_by_name("main"), "welcome", person)
        await run.advance(run.rng.randrange(1, 120_000))


def outbox(run: SimulationRun) -> dict[str, object]:
    return {"MAILER": Mailer(run)}


def test_seeds_pass_and_inject_every_fault_of_a_call_path() -> None:
    """A correct object passes its seeds while commits, awaits, outside calls, evictions
    and alarms all get faults."""
    rates = FaultRates(
        crash_before_commit=0.05,
        crash_after_commit=0.05,
        fail_commit=0.03,
        crash_at_await=0.05,
        fail_outside=0.1,
        crash_at_outside=0.1,
        evict=0.3,
        late_alarm=0.3,
        fail_set_alarm=0.3,
    )
    simulation = Simulation(
        {"OUTBOX": Outbox},
        welcomes,
        bindings=outbox,
        invariants=[effects_at_least_once(), nothing_stranded()],
        rates=rates,
        steps=30,
    )
    report = simulation.check(seeds=4)
    assert report.runs == 4 and report.seeds == [0, 1, 2, 3]
    kinds = {kind.split()[0] for kind in report.faults}
    assert kinds >= {"commit", "await", "outside", "advance", "alarm", "set_alarm"}
    assert {"commit crash", "commit crash_after", "commit fail"} <= set(report.faults)


def test_a_seed_replays_the_same_trace() -> None:
    """Two runs of one seed make the same calls and faults at the same virtual times."""
    traces: list[list[str]] = []

    async def traced(run: SimulationRun) -> None:
        await welcomes(run)
        traces.append(run.trace.lines())

    simulation = Simulation({"OUTBOX": Outbox}, traced, bindings=outbox, steps=20)
    simulation.replay(5)
    simulation.replay(5)
    assert traces[0] == traces[1]
    assert any("crash" in line or "evict" in line or "fail" in line for line in traces[0])


class ForgetfulOutbox(Durable, DurableObject):
    """Marks a person welcomed before registering the mail: a crash between the two
    commits loses the mail for good."""

    @operation
    async def deliver(self, call: DurableCall[dict[str, str]]) -> None:
        await self.env.MAILER.send(call.idempotency_key, call.payload["to"])

    async def welcome(self, to: str) -> None:
        if await self.ctx.storage.get(to):
            return
        await self.ctx.storage.put(to, True)
        await self.ctx.storage.sync()
        await self.deliver(f"welcome:{to}", {"to": to})


async def welcome_until_acknowledged(run: SimulationRun) -> None:
    """Each person is welcomed, again and again until one call is acknowledged."""
    welcomed = run.seen.setdefault("welcomed", set())
    for _ in run.steps():
        person = run.rng.choice(["ann", "bob", "cid"])
        while not (await run.call(run.env.OUTBOX.get_by_name("main"), "welcome", person)).ok:
            pass
        welcomed.add(person)
        await run.advance(run.rng.randrange(1, 60_000))


def everyone_mailed(run: SimulationRun) -> None:
    """Everyone acknowledged as welcomed got their mail."""
    mailed = {effect.subject for effect in run.ledger.effects}
    missing = run.seen.get("welcomed", set()) - mailed
    assert not missing, f"welcomed but never mailed: {sorted(missing)}"


def test_a_failure_is_shrunk_and_names_the_command_that_replays_it() -> None:
    """A crash between two commits of a handler fails an invariant: the failure gives the
    seed, a short trace and `--durability-seed=TOKEN`, and that token fails again."""
    simulation = Simulation(
        {"OUTBOX": ForgetfulOutbox},
        welcome_until_acknowledged,
        bindings=outbox,
        invariants=[everyone_mailed],
        rates=replace(QUIET, crash_before_commit=0.2),
        steps=20,
    )
    with pytest.raises(SimulationFailure) as failed:
        simulation.check(seeds=10)
    failure = failed.value
    assert "everyone_mailed" in str(failure)
    assert f"--durability-seed={failure.token}" in failure.command
    assert failure.command.startswith("pytest ")
    assert "test_a_failure_is_shrunk" in failure.command
    seed, steps, faults = failure.token.split(":")
    assert int(seed) == failure.seed and int(steps) <= 20
    assert faults.count("=") == 1, "one crash suffices, and shrinking keeps just it"
    assert any("crash OUTBOX:main before its commit" in line for line in failure.trace)
    with pytest.raises(SimulationFailure) as again:
        simulation.replay(failure.token)
    assert again.value.trace == failure.trace


def test_exhaustive_mode_crashes_at_every_commit_in_turn() -> None:
    """Exhaustive mode finds the commit whose crash loses the mail, without sampling;
    the safe object passes one run per commit and per crash."""
    forgetful = Simulation(
        {"OUTBOX": ForgetfulOutbox},
        welcome_until_acknowledged,
        bindings=outbox,
        invariants=[everyone_mailed],
        rates=QUIET,
        steps=3,
    )
    with pytest.raises(SimulationFailure, match="everyone_mailed"):
        forgetful.exhaust()
    safe = Simulation(
        {"OUTBOX": Outbox},
        welcome_until_acknowledged,
        bindings=outbox,
        invariants=[everyone_mailed, effects_at_least_once()],
        rates=QUIET,
        steps=3,
    )
    pristine = safe.replay("0:3:")  # seed 0, 3 steps, no faults: the points to sweep
    commits, awaits = pristine.points["commit"], pristine.points["await"]
    assert commits > 0 and awaits > 0
    report = safe.exhaust(points=("commit", "await"))
    assert report.runs == 1 + 2 * commits + awaits
    assert report.faults["commit crash"] == report.faults["commit crash_after"] == commits
    assert report.faults["await crash"] == awaits


class Reminders(DurableObject):
    """Sets its alarm, then (a bug) deletes it when asked to snooze."""

    async def remind_in(self, ms: int) -> None:
        await self.ctx.storage.set_alarm(now_ms() + ms)

    async def alarm(self, info: Any = None) -> None:
        await self.ctx.storage.put("rang", now_ms())


def test_a_scenario_error_and_a_hang_fail_with_their_trace() -> None:
    """An assertion of the scenario fails the run where it stands; a call that can never
    finish fails as hung instead of waiting forever."""

    async def asserts(run: SimulationRun) -> None:
        for step in run.steps():
            await run.call(run.env.REMINDERS.get_by_name("r"), "remind_in", 1_000)
            assert step < 3, "step 3 is refused"

    with pytest.raises(SimulationFailure, match="step 3 is refused") as failed:
        Simulation({"REMINDERS": Reminders}, asserts, rates=QUIET).check(seeds=1)
    assert failed.value.token.startswith("0:3:")

    class Stuck(DurableObject):
        async def wait(self) -> None:
            await asyncio.get_running_loop().create_future()

    async def waits(run: SimulationRun) -> None:
        await run.call(run.env.STUCK.get_by_name("s"), "wait")

    with pytest.raises(SimulationFailure, match="still waiting after 60000 ms"):
        Simulation({"STUCK": Stuck}, waits, rates=QUIET, max_call_ms=60_000).check(seeds=1)


def test_files_mode_keeps_each_run_in_sqlite_files(tmp_path: Path) -> None:
    """`files=True` runs the objects from SQLite files, crashes and all."""
    found: list[str] = []

    async def looks(run: SimulationRun) -> None:
        await welcomes(run)
        found.append(str(run.runtime.path))

    Simulation(
        {"OUTBOX": Outbox},
        looks,
        bindings=outbox,
        invariants=[effects_at_least_once(), nothing_stranded()],
        files=True,
        steps=10,
    ).check(seeds=2)
    assert len(found) == 2 and all(path != "None" for path in found)


def test_check_refuses_to_run_inside_an_event_loop() -> None:
    """A simulation runs each seed on a loop of its own: an async test is told so."""
    simulation = Simulation({"OUTBOX": Outbox}, welcomes, bindings=outbox, steps=1)

    async def inside() -> None:
        simulation.check(seeds=1)

    with pytest.raises(RuntimeError, match="plain test function"):
        asyncio.run(inside())


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"worker": 3}, TypeError, "worker must be"),
        ({"scenario": "x"}, TypeError, "scenario must be"),
        ({"steps": 0}, ValueError, "steps must be a positive integer"),
        ({"rates": {"evict": 1}}, TypeError, "rates must be a FaultRates"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, Any], error: type, message: str) -> None:
    """Each bad argument raises at construction, naming it."""
    arguments: dict[str, Any] = {"worker": {"OUTBOX": Outbox}, "scenario": welcomes, **kwargs}
    with pytest.raises(error, match=message):
        Simulation(**arguments)


def test_bad_rates_and_tokens_are_refused() -> None:
    """A rate outside [0, 1] and a token that does not parse are refused with the rule."""
    with pytest.raises(ValueError, match="evict must be between 0 and 1"):
        FaultRates(evict=2)
    simulation = Simulation({"OUTBOX": Outbox}, welcomes, bindings=outbox, steps=1)
    with pytest.raises(ValueError, match="must be SEED or SEED:STEPS:FAULTS"):
        simulation.replay("1:2")
    with pytest.raises(ValueError, match="not a fault"):
        simulation.replay("1:2:x=crash")


def test_outside_names_the_services_the_simulation_stands_between() -> None:
    """By default every service binding is reached through the simulation (its calls are
    fault points); `outside=()` leaves them alone."""
    rates = replace(QUIET, slow_outside=0.5)
    wrapped = Simulation({"OUTBOX": Outbox}, welcomes, bindings=outbox, rates=rates, steps=5)
    assert wrapped.check(seeds=1).points["outside"] > 0
    alone = Simulation(
        {"OUTBOX": Outbox}, welcomes, bindings=outbox, rates=rates, steps=5, outside=()
    )
    assert alone.check(seeds=1).points["outside"] == 0
