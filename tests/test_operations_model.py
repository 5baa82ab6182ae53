"""A stateful property test: durable operations and a named alarm, with eviction and crash.

Hypothesis drives registrations (each id's handler fails a chosen number of times
before it succeeds), schedules of the named alarm, time, evictions and crashes against
one file-backed object, and checks after every step that no answer contradicts the
model: an id keeps its first registration, attempts and outcomes never go back, and
nothing runs before its time. `settle` lets a long time pass with no call: then every
registered operation has its final outcome and the last scheduled alarm has rung.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from conftest import START_MS
from durability import (
    Durability,
    DurabilityAlarms,
    DurabilityScheduler,
    DurableAlarmInfo,
    DurableCall,
    RetryPolicy,
    now_ms,
)
from durability.runtime import AlarmInvocationInfo, DurableObject, Runtime
from durability.testing import VirtualClock

pytestmark = pytest.mark.slow

MAX_ATTEMPTS = 3
RETRY_MS = 1_000
IDS = [f"op{n}" for n in range(6)]


class Subject(DurableObject):
    """Operations whose handler fails as each id's payload says; a named alarm `tick`."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.world: World = env.WORLD
        retries = RetryPolicy(max_attempts=MAX_ATTEMPTS, delay=lambda attempt: RETRY_MS)
        self.scheduler = DurabilityScheduler(context=ctx)
        self.durability = Durability(
            scheduler=self.scheduler, handlers={"work": self._work}, retries=retries
        )
        self.alarms = DurabilityAlarms(scheduler=self.scheduler, handlers={"tick": self._tick})

    def _work(self, call: DurableCall) -> int:
        self.world.attempts.append((call.id, call.attempt, now_ms()))
        if call.attempt <= call.payload["fail"]:
            raise RuntimeError(f"planned failure {call.attempt}")
        self.world.effects.append(call.id)
        return call.attempt

    def _tick(self, info: DurableAlarmInfo) -> None:
        self.world.rings.append((info.scheduled_time, now_ms()))

    async def register(self, call_id: str, fail: int) -> None:
        await self.durability.work(id=call_id, payload={"fail": fail})

    async def tick_at(self, at: int) -> None:
        await self.alarms.tick(at)

    async def results(self) -> dict[str, list[Any]]:
        found = {}
        for call_id in IDS:
            result = await self.durability.work.get_result(call_id)
            found[call_id] = [result.status, result.attempt, result.result]
        return found

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.scheduler.alarm(info)


class World:
    """What happened outside the object: handler attempts, effects, alarm rings."""

    def __init__(self) -> None:
        self.attempts: list[tuple[str, int, int]] = []
        self.effects: list[str] = []
        self.rings: list[tuple[int, int]] = []


class OperationsModel(RuleBasedStateMachine):
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
        self.plans: dict[str, int] = {}
        """Each registered id's planned failures (its first registration wins)."""
        self.seen: dict[str, list[Any]] = {}
        self.ticks: list[int] = []

    def run(self, awaitable: Any) -> Any:
        return self.loop.run_until_complete(awaitable)

    def teardown(self) -> None:
        try:
            self.run(self.rt.close())
        finally:
            self.loop.close()
            self.directory.cleanup()

    @rule(call_id=st.sampled_from(IDS), fail=st.integers(0, MAX_ATTEMPTS))
    def register(self, call_id: str, fail: int) -> None:
        self.run(self.stub.register(call_id, fail))
        self.plans.setdefault(call_id, fail)

    @rule(ahead=st.integers(0, 5_000))
    def tick(self, ahead: int) -> None:
        at = self.clock.now_ms() + ahead
        self.run(self.stub.tick_at(at))
        self.ticks.append(at)

    @rule(ms=st.sampled_from([1, 500, 1_000, 2_500]))
    def advance(self, ms: int) -> None:
        self.run(self.clock.advance(ms))

    @rule(crash=st.booleans())
    def evict(self, crash: bool) -> None:
        self.run(self.rt.crash(self.stub) if crash else self.rt.evict(self.stub))

    @rule()
    def settle(self) -> None:
        """A long time with no call: everything registered reaches its outcome."""
        self.run(self.clock.advance(60_000))
        results = self.run(self.stub.results())
        for call_id, fail in self.plans.items():
            status, attempt, result = results[call_id]
            if fail < MAX_ATTEMPTS:
                assert (status, attempt, result) == ("completed", fail + 1, fail + 1), call_id
                assert call_id in self.world.effects, call_id
            else:
                assert (status, attempt) == ("failed", MAX_ATTEMPTS), call_id
                assert call_id not in self.world.effects, call_id
        if self.ticks:
            assert self.ticks[-1] in [scheduled for scheduled, _ in self.world.rings]

    @invariant()
    def answers_never_contradict_the_model(self) -> None:
        results = self.run(self.stub.results())
        for call_id, (status, attempt, result) in results.items():
            fail = self.plans.get(call_id)
            if fail is None:
                assert status == "not_found", call_id
                continue
            before = self.seen.get(call_id)
            if before is not None and before[0] in ("completed", "failed"):
                assert [status, attempt, result] == before, call_id
            if before is not None and before[1] is not None:
                assert (attempt or 0) >= before[1], call_id
            if status == "completed":
                assert attempt == result == fail + 1, call_id
            self.seen[call_id] = [status, attempt, result]
        for call_id, attempt, _ in self.world.attempts:
            assert attempt <= MAX_ATTEMPTS and call_id in self.plans, call_id
        for scheduled, rang in self.world.rings:
            assert rang >= scheduled and scheduled in self.ticks, (scheduled, rang)


OperationsModel.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestOperationsModel = OperationsModel.TestCase
