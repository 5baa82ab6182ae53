"""The ready-made invariants of `durability.testing` fail on the promise they check: each is
shown an object that breaks it (on purpose, through its own storage), with no faults."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest

from durability import DurabilityLog, Durable, DurableCall, LogAppendInput, operation
from durability.runtime import DurableObject
from durability.testing import (
    FaultRates,
    Invariant,
    Simulation,
    SimulationFailure,
    SimulationRun,
    appends_kept,
    effects_at_least_once,
    log_offsets_contiguous,
    nothing_stranded,
)

ZERO: dict[str, Any] = {f.name: 0.0 for f in fields(FaultRates) if not f.name.startswith("max_")}
QUIET = FaultRates(**ZERO)
HOUR_MS = 3_600_000


class Ledgered:
    """A fake service writing each key in the run's ledger."""

    def __init__(self, run: SimulationRun) -> None:
        self.run = run

    async def apply(self, key: str) -> None:
        self.run.ledger.record(key)


class Jobs(Durable, DurableObject):
    """Operations whose effect goes to the ledger, and ways to break what is stored."""

    @operation
    async def job(self, call: DurableCall[Any]) -> str:
        if call.payload == "with effect":
            await self.env.SERVICE.apply(call.idempotency_key)
        return "done"

    async def add(self, id: str, payload: str, delay_ms: int = 0) -> None:
        await self.job(id, payload, delay_ms=delay_ms)

    async def drop_alarm(self) -> None:
        await self.ctx.storage.delete_alarm()

    async def rewrite_results(self) -> None:
        self.ctx.storage.sql.exec("UPDATE durability_calls SET result = '\"other\"'")


class Journal(DurableObject):
    """A log, and ways to break it."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.log: DurabilityLog[Any] = DurabilityLog(context=ctx)

    async def append(self, body: str) -> int:
        result = await self.log.append([LogAppendInput(body)])
        assert result.value is not None
        return result.value[0]

    async def drop(self, offset: int) -> None:
        self.ctx.storage.sql.exec("DELETE FROM durability_log_records WHERE offset = ?", offset)


def _fails(
    bindings: dict[str, object], scenario: Any, invariant: Invariant, message: str
) -> SimulationFailure:
    simulation = Simulation(
        bindings,
        scenario,
        bindings=lambda run: {"SERVICE": Ledgered(run)},
        invariants=[invariant],
        rates=QUIET,
        steps=1,
    )
    with pytest.raises(SimulationFailure, match=message) as failed:
        simulation.check(seeds=1)
    return failed.value


def test_nothing_stranded_finds_pending_work_without_an_alarm() -> None:
    """An operation due in an hour whose object's alarm was deleted will never run."""

    async def strands(run: SimulationRun) -> None:
        jobs = run.env.JOBS.get_by_name("j")
        await run.call(jobs, "add", "later", "with effect", HOUR_MS)
        await run.call(jobs, "drop_alarm")

    _fails({"JOBS": Jobs}, strands, nothing_stranded(), "stranded: JOBS:j operation job later")


def test_effects_at_least_once_finds_a_completed_operation_without_effect() -> None:
    """An operation that completed without reaching the service breaks the first half."""

    async def skips(run: SimulationRun) -> None:
        await run.call(run.env.JOBS.get_by_name("j"), "add", "quiet", "no effect")

    _fails({"JOBS": Jobs}, skips, effects_at_least_once(), "completed with no effect")


def test_effects_at_least_once_finds_a_result_recorded_twice() -> None:
    """A completed operation whose result changes afterwards breaks the second half,
    seen at the step after the change."""

    async def rewrites(run: SimulationRun) -> None:
        jobs = run.env.JOBS.get_by_name("j")
        for number in run.steps():
            await run.call(jobs, "add", f"job-{number}", "with effect")
        await run.call(jobs, "rewrite_results")

    _fails({"JOBS": Jobs}, rewrites, effects_at_least_once(), "recorded completed twice")


def test_log_offsets_contiguous_finds_a_gap() -> None:
    """A record missing between others is a gap in the offsets."""

    async def gaps(run: SimulationRun) -> None:
        journal = run.env.JOURNAL.get_by_name("l")
        for body in ("a", "b", "c"):
            await run.call(journal, "append", body)
        await run.call(journal, "drop", 1)

    _fails({"JOURNAL": Journal}, gaps, log_offsets_contiguous(), r"offsets \[1\] missing")


def test_appends_kept_finds_an_acknowledged_append_gone() -> None:
    """An append whose call returned, later missing from the log, is lost."""

    async def loses(run: SimulationRun) -> None:
        journal = run.env.JOURNAL.get_by_name("l")
        acknowledged = run.seen.setdefault("appends", [])
        for body in ("a", "b", "c"):
            reply = await run.call(journal, "append", body)
            acknowledged.append((journal, reply.value, body))
        await run.call(journal, "drop", 2)

    kept = appends_kept(lambda run: run.seen["appends"])
    _fails({"JOURNAL": Journal}, loses, kept, "offset 2: it is missing from the hot records")


def test_the_ready_made_invariants_pass_on_objects_that_keep_their_promises() -> None:
    """The same objects, left alone, pass every one of them."""

    async def behaves(run: SimulationRun) -> None:
        jobs = run.env.JOBS.get_by_name("j")
        journal = run.env.JOURNAL.get_by_name("l")
        acknowledged = run.seen.setdefault("appends", [])
        for number in run.steps():
            await run.call(jobs, "add", f"job-{number}", "with effect", number * 1_000)
            reply = await run.call(journal, "append", f"body-{number}")
            if reply.ok:
                acknowledged.append((journal, reply.value, f"body-{number}"))
            await run.advance(2_000)

    report = Simulation(
        {"JOBS": Jobs, "JOURNAL": Journal},
        behaves,
        bindings=lambda run: {"SERVICE": Ledgered(run)},
        invariants=[
            effects_at_least_once(),
            nothing_stranded(),
            log_offsets_contiguous(),
            appends_kept(lambda run: run.seen["appends"]),
        ],
        steps=20,
    ).check(seeds=3)
    assert sum(report.faults.values()) > 0
