"""The 17 runtime-lab fault-injection scenarios.

A `Lab` object runs durable operations and named alarms whose handlers deliver to a
separate `EffectLedger` object. The ledger records every delivery apart from the
effects it commits, optionally deduplicating by the call id, so each test judges both
what the library claims (call status, attempts) and what really happened downstream.
Faults are planned per attempt in the call's payload; resets are real
`Runtime.crash` calls while an attempt is parked at the injection point.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import MakeRuntime
from durability import (
    DuplicateDurableCallError,
    Durability,
    DurabilityAlarms,
    DurabilityScheduler,
    DurableAlarmInfo,
    DurableCall,
    MethodOptions,
    NonRetryableError,
    RetryPolicy,
)
from durability.runtime import AlarmInvocationInfo, DurableObject, ObjectStub, Runtime
from durability.testing import VirtualClock

RETRY_DELAY_MS = 1_000
ATTEMPT_TIMEOUT_MS = 2_000
LATE_HANDLER_MS = 3_500
CONCURRENCY = 10


class ReceiverError(Exception):
    """The effect ledger answered with a failure status."""


class EffectLedger(DurableObject):
    """The external receiver: counts deliveries and committed effects separately."""

    def _tables(self) -> None:
        for table in ("deliveries", "effects"):
            self.ctx.storage.sql.exec(
                f"CREATE TABLE IF NOT EXISTS {table} "
                "(seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, detail INTEGER)"
            )

    async def deliver(
        self,
        key: str,
        *,
        dedup: bool,
        fail_before_commit: bool = False,
        fail_after_commit: bool = False,
        detail: int | None = None,
    ) -> int:
        """Record the delivery, maybe commit the effect; return an HTTP-like status."""
        self._tables()
        sql = self.ctx.storage.sql
        sql.exec("INSERT INTO deliveries (key, detail) VALUES (?, ?)", key, detail)
        if fail_before_commit:
            return 503
        seen = sql.exec("SELECT COUNT(*) AS n FROM effects WHERE key = ?", key).one()["n"]
        if not (dedup and seen):
            sql.exec("INSERT INTO effects (key, detail) VALUES (?, ?)", key, detail)
        return 502 if fail_after_commit else 200

    async def snapshot(self) -> dict[str, Any]:
        """Deliveries and effects so far."""
        self._tables()
        sql = self.ctx.storage.sql
        return {
            table: [
                [row["key"], row["detail"]]
                for row in sql.exec(f"SELECT key, detail FROM {table} ORDER BY seq")
            ]
            for table in ("deliveries", "effects")
        }


def _in(attempt: int, plan: dict[str, Any], fault: str) -> bool:
    return attempt in plan.get(fault, ())


async def _park_forever() -> None:
    """Wait until the instance is crashed (the injection point of a reset scenario)."""
    await asyncio.Event().wait()


async def _sleep_ignoring_cancellation(ms: int) -> None:
    """Keep working for `ms` of (virtual) time whatever the engine says."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ms / 1000
    while loop.time() < deadline:
        try:
            await asyncio.sleep(deadline - loop.time())
        except asyncio.CancelledError:
            continue


class Lab(DurableObject):
    """Runs operations and named alarms under the faults each call's plan asks for."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.timeline: list[str] = []
        self.events: list[tuple[str, str | None, str | None]] = []
        self.running: dict[str, int] = {}
        self.max_running = 0
        self.max_running_per_key: dict[str, int] = {}
        retries = RetryPolicy(max_attempts=5, delay=lambda attempt: RETRY_DELAY_MS)
        self.scheduler = DurabilityScheduler(context=ctx, alarm_concurrency=CONCURRENCY)
        self.durability = Durability(
            scheduler=self.scheduler,
            handlers={"effect": self._effect, "other_effect": self._effect},
            retries=retries,
            methods={"effect": MethodOptions(attempt_timeout_ms=ATTEMPT_TIMEOUT_MS)},
            on_lifecycle_event=self._record_event,
        )
        self.alarms = DurabilityAlarms(
            scheduler=self.scheduler,
            handlers={"ping": self._ping},
            retries=retries,
            on_lifecycle_event=self._record_event,
        )

    def _record_event(self, event: Any) -> None:
        error = getattr(event, "error", None)
        self.events.append(
            (event.type, getattr(event, "outcome", None), error.name if error else None)
        )

    def _enter(self, key: str) -> None:
        self.running[key] = self.running.get(key, 0) + 1
        self.max_running = max(self.max_running, sum(self.running.values()))
        self.max_running_per_key[key] = max(self.max_running_per_key.get(key, 0), self.running[key])

    def _leave(self, key: str) -> None:
        self.running[key] -= 1

    async def _deliver(self, key: str, attempt: int, plan: dict[str, Any], detail: int) -> None:
        ledger = self.env["LEDGER"].get_by_name(plan["ledger"])
        status = await ledger.deliver(
            key,
            dedup=plan.get("dedup", True),
            fail_before_commit=_in(attempt, plan, "receiver_fails_before_commit"),
            fail_after_commit=_in(attempt, plan, "receiver_fails_after_commit"),
            detail=detail,
        )
        if status != 200:
            raise ReceiverError(f"receiver answered {status}")

    async def _effect(self, call: DurableCall) -> None:
        plan = call.payload
        assert isinstance(plan, dict)
        attempt = call.attempt
        self.timeline.append(f"{call.id}:attempt:{attempt}")
        self._enter(call.id)
        try:
            if plan.get("non_retryable"):
                raise NonRetryableError("input can never succeed")
            if plan.get("always_fail") or _in(attempt, plan, "throws"):
                raise RuntimeError(f"transient failure on attempt {attempt}")
            if _in(attempt, plan, "reset_before_effect"):
                await _park_forever()
            if _in(attempt, plan, "honours_timeout"):
                try:
                    await call.signal.wait()
                finally:
                    if call.signal.aborted:
                        self.timeline.append(f"{call.id}:handler_aborted")
                call.signal.raise_if_aborted()
            if _in(attempt, plan, "ignores_timeout"):
                await _sleep_ignoring_cancellation(LATE_HANDLER_MS)
            if plan.get("work_ms"):
                await asyncio.sleep(plan["work_ms"] / 1000)
            await self._deliver(call.id, attempt, plan, attempt)
            if _in(attempt, plan, "reset_after_effect"):
                await _park_forever()
        finally:
            self._leave(call.id)

    async def _ping(self, info: DurableAlarmInfo) -> None:
        plan = await self.ctx.storage.get("ping_plan")
        assert isinstance(plan, dict)
        self._enter(info.name)
        try:
            await self._deliver(info.idempotency_key, info.attempt, plan, info.scheduled_time)
        finally:
            self._leave(info.name)

    async def run(self, operation: str, id: str, plan: dict[str, Any]) -> None:
        """Register one call (returns once it is durable)."""
        await self.durability.operation(operation)(id=id, payload=plan)

    async def result(self, id: str) -> dict[str, Any]:
        """The call's status and error as `get_result` reports them, and its attempt count."""
        result = await self.durability.effect.get_result(id)
        row = self.ctx.storage.sql.exec("SELECT attempt FROM durability_calls WHERE id = ?", id)
        return {
            "status": result.status,
            "attempt": row.one()["attempt"],
            "error_name": result.error.name if result.error is not None else None,
        }

    async def calls(self) -> int:
        """How many call records exist."""
        return int(
            self.ctx.storage.sql.exec("SELECT COUNT(*) AS n FROM durability_calls").one()["n"]
        )

    async def schedule_ping(self, at_ms: int, plan: dict[str, Any]) -> None:
        """Store the ping plan and schedule (or replace) the `ping` occurrence."""
        await self.ctx.storage.put("ping_plan", plan)
        await self.alarms.ping(at_ms)

    async def alarm_rows(self) -> int:
        """How many named-alarm rows exist."""
        return int(
            self.ctx.storage.sql.exec("SELECT COUNT(*) AS n FROM durability_alarms").one()["n"]
        )

    async def observed(self) -> dict[str, Any]:
        """What this instance saw: timeline, lifecycle events, concurrency."""
        return {
            "timeline": self.timeline,
            "events": [list(event) for event in self.events],
            "max_running": self.max_running,
            "max_running_per_key": self.max_running_per_key,
        }

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.scheduler.alarm(info)


@dataclass
class World:
    """One scenario's runtime, clock, lab and ledger."""

    rt: Runtime
    clock: VirtualClock
    lab: ObjectStub
    ledger: ObjectStub
    name: str

    def plan(self, **faults: Any) -> dict[str, Any]:
        return {"ledger": self.name, **faults}

    async def settle(self, ms: int = 60_000) -> None:
        """Let every retry and alarm within `ms` of virtual time run."""
        await self.clock.run_until_idle()
        await self.clock.advance(ms)
        await self.clock.run_until_idle()

    async def effects(self) -> tuple[int, int]:
        snapshot = await self.ledger.snapshot()
        return len(snapshot["deliveries"]), len(snapshot["effects"])

    async def wait_for_timeline(self, entry: str) -> None:
        """Run ready work until the lab's timeline shows `entry` (no time passes)."""
        for _ in range(100):
            await self.clock.run_until_idle()
            if entry in (await self.lab.observed())["timeline"]:
                return
        raise AssertionError(f"{entry} never happened")


@pytest.fixture
async def world(
    tmp_path: Path, request: pytest.FixtureRequest, make_runtime: MakeRuntime, clock: VirtualClock
) -> AsyncIterator[World]:
    bindings = {"LAB": Lab, "LEDGER": EffectLedger}
    async with make_runtime(path=str(tmp_path), bindings=bindings) as rt:
        name = request.node.name
        yield World(
            rt,
            clock,
            rt.env.LAB.get_by_name(name),
            rt.env.LEDGER.get_by_name(name),
            name,
        )


async def test_happy_path(world: World) -> None:
    """A call completes on its first attempt with one effect."""
    await world.lab.run("effect", "call", world.plan())
    await world.settle()
    assert await _status(world) == ("completed", 1)
    assert await world.effects() == (1, 1)


async def test_transient_before_effect(world: World) -> None:
    """A handler that throws twice before its effect completes on attempt 3, one effect."""
    await world.lab.run("effect", "call", world.plan(throws=[1, 2]))
    await world.settle()
    assert await _status(world) == ("completed", 3)
    assert await world.effects() == (1, 1)


async def test_downstream_unavailable(world: World) -> None:
    """A receiver failing before it commits twice: three deliveries, one effect, no phantom."""
    await world.lab.run("effect", "call", world.plan(receiver_fails_before_commit=[1, 2]))
    await world.settle()
    assert await _status(world) == ("completed", 3)
    assert await world.effects() == (3, 1)


async def test_after_effect_idempotent(world: World) -> None:
    """Lost acknowledgements with a deduplicating receiver: three deliveries, one effect."""
    await world.lab.run("effect", "call", world.plan(receiver_fails_after_commit=[1, 2]))
    await world.settle()
    assert await _status(world) == ("completed", 3)
    assert await world.effects() == (3, 1)


async def test_after_effect_unprotected(world: World) -> None:
    """Warning demonstration: without dedup, lost acknowledgements duplicate the effect."""
    plan = world.plan(receiver_fails_after_commit=[1, 2], dedup=False)
    await world.lab.run("effect", "call", plan)
    await world.settle()
    assert await _status(world) == ("completed", 3)
    assert await world.effects() == (3, 3)


async def test_crash_before_effect(world: World) -> None:
    """A reset before the effect: a fresh instance's alarm recovers the call, one effect."""
    await world.lab.run("effect", "call", world.plan(reset_before_effect=[1]))
    await world.wait_for_timeline("call:attempt:1")
    await world.rt.crash(world.lab)
    await world.settle()
    status, attempt = await _status(world)
    assert status == "completed" and attempt is not None and attempt >= 2
    assert await world.effects() == (1, 1)


async def test_crash_after_effect_idempotent(world: World) -> None:
    """A reset after the effect, before completion: redelivered, deduplicated to one effect."""
    await world.lab.run("effect", "call", world.plan(reset_after_effect=[1]))
    await world.wait_for_timeline("call:attempt:1")
    await world.clock.run_until_idle()
    await world.rt.crash(world.lab)
    await world.settle()
    status, attempt = await _status(world)
    assert status == "completed" and attempt is not None and attempt >= 2
    deliveries, effects = await world.effects()
    assert deliveries >= 2 and effects == 1


async def test_crash_after_effect_unprotected(world: World) -> None:
    """Warning demonstration: the same reset without dedup duplicates the effect."""
    await world.lab.run("effect", "call", world.plan(reset_after_effect=[1], dedup=False))
    await world.wait_for_timeline("call:attempt:1")
    await world.clock.run_until_idle()
    await world.rt.crash(world.lab)
    await world.settle()
    assert (await _status(world))[0] == "completed"
    deliveries, effects = await world.effects()
    assert deliveries >= 2 and effects >= 2


async def test_timeout_then_success(world: World) -> None:
    """An attempt that honours its abort signal times out; attempt 2 succeeds, one effect."""
    await world.lab.run("effect", "call", world.plan(honours_timeout=[1]))
    await world.settle()
    assert await _status(world) == ("completed", 2)
    assert await world.effects() == (1, 1)
    observed = await world.lab.observed()
    assert "call:handler_aborted" in observed["timeline"]
    assert ["attempt_settled", "retry_scheduled", "DurableAttemptTimeoutError"] in observed[
        "events"
    ]


async def test_timeout_ignores_abort(world: World) -> None:
    """A handler ignoring its abort delivers late; the retry never overlaps it; one effect."""
    await world.lab.run("effect", "call", world.plan(ignores_timeout=[1]))
    await world.settle()
    assert (await _status(world))[0] == "completed"
    deliveries, effects = await world.effects()
    assert deliveries >= 2 and effects == 1
    assert (await world.lab.observed())["max_running_per_key"]["call"] == 1


async def test_non_retryable(world: World) -> None:
    """NonRetryableError fails the call after exactly one attempt, with no effect."""
    await world.lab.run("effect", "call", world.plan(non_retryable=True))
    await world.settle()
    assert await world.lab.result("call") == {
        "status": "failed",
        "attempt": 1,
        "error_name": "NonRetryableError",
    }
    assert await world.effects() == (0, 0)


async def test_retry_exhaustion(world: World) -> None:
    """A call failing every attempt is durably failed after five attempts, no effect."""
    await world.lab.run("effect", "call", world.plan(always_fail=True))
    await world.settle()
    result = await world.lab.result("call")
    assert (result["status"], result["attempt"]) == ("failed", 5)
    assert await world.effects() == (0, 0)


async def test_duplicate_submission(world: World) -> None:
    """Twenty concurrent registrations of one id: one record, one completion, one effect."""
    plan = world.plan(dedup=False)
    await asyncio.gather(*(world.lab.run("effect", "call", plan) for _ in range(20)))
    await world.settle()
    assert await world.lab.calls() == 1
    assert (await _status(world))[0] == "completed"
    assert await world.effects() == (1, 1)


async def test_operation_id_collision(world: World) -> None:
    """An id reused by another operation raises; the original call completes once."""
    await world.lab.run("effect", "call", world.plan())
    with pytest.raises(DuplicateDurableCallError):
        await world.lab.run("other_effect", "call", world.plan())
    await world.settle()
    assert (await _status(world))[0] == "completed"
    assert await world.effects() == (1, 1)


async def test_named_alarm_retry(world: World) -> None:
    """A failed first attempt retries with the same idempotency key; the row is cleared."""
    at = world.clock.now_ms() + 5_000
    await world.lab.schedule_ping(at, world.plan(receiver_fails_after_commit=[1]))
    await world.settle()
    snapshot = await world.ledger.snapshot()
    assert len(snapshot["deliveries"]) == 2 and len(snapshot["effects"]) == 1
    assert len({key for key, _ in snapshot["deliveries"]}) == 1
    assert await world.lab.alarm_rows() == 0


async def test_named_alarm_replacement(world: World) -> None:
    """Scheduling a name twice before it fires runs only the replacement."""
    first = world.clock.now_ms() + 5_000
    replacement = first + 20_000
    await world.lab.schedule_ping(first, world.plan())
    await world.lab.schedule_ping(replacement, world.plan())
    await world.settle()
    snapshot = await world.ledger.snapshot()
    assert [detail for _, detail in snapshot["deliveries"]] == [replacement]
    assert len(snapshot["effects"]) == 1
    assert await world.lab.alarm_rows() == 0


async def test_concurrency_burst(world: World) -> None:
    """Twelve calls failing once become due together; all complete once, interleaved."""
    plan = world.plan(throws=[1], work_ms=50)
    await asyncio.gather(*(world.lab.run("effect", f"call-{i}", plan) for i in range(12)))
    await world.settle()
    for i in range(12):
        assert (await world.lab.result(f"call-{i}"))["status"] == "completed"
    assert await world.effects() == (12, 12)
    max_running = (await world.lab.observed())["max_running"]
    assert 1 < max_running <= CONCURRENCY


async def _status(world: World) -> tuple[str, int | None]:
    result = await world.lab.result("call")
    return result["status"], result["attempt"]
