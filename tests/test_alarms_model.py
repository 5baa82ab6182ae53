"""A stateful property test: named alarms against a small model of their rules.

Hypothesis schedules and reschedules three names, plans how their next attempts end
(succeed, fail, or have their effect and then crash the object before the attempt is
recorded), moves the virtual clock, and evicts and crashes the object between steps.
Every delivery is checked against the model when it happens (the occurrence
scheduled, never early, the attempt after the last, one idempotency key per
occurrence), the stored rows after each step, and, once time has moved, that nothing
due was left behind. Each example runs on a fresh event loop and data directory.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import durability
from conftest import START_MS
from durability import DurabilityAlarms, DurableAlarmInfo, RetryPolicy
from durability.runtime import AlarmInvocationInfo, DurableObject, Runtime
from durability.testing import VirtualClock

pytestmark = pytest.mark.slow

NAMES = ("a", "b", "c")
MAX_ATTEMPTS = 3
RETRY_MS = 1_000
MIN_DELAY_MS = 1_000
LATE_MS = 5_000
"""How late a due attempt may start: after an eviction or crash, the next alarm pass."""
ALARM_RETRY_MS = 2_000
"""The runtime's first retry of an `alarm()` call that did not finish (then doubling)."""


@dataclass
class Plan:
    """The outside world of the object: how attempts end, and every delivery seen."""

    outcomes: dict[str, list[str]] = field(default_factory=lambda: {n: [] for n in NAMES})
    deliveries: list[tuple[int, str, int, int, str, str]] = field(default_factory=list)
    """(at, name, scheduled_time, attempt, idempotency_key, outcome) per delivery."""
    runtime: Runtime | None = None


class Alarmed(DurableObject):
    """Named alarms `a`, `b`, `c`, whose attempts end as the plan says.

    One attempt at a time, so a crash planned in one attempt interrupts only that one.
    """

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.plan: Plan = env["PLAN"]
        self.alarms = DurabilityAlarms(
            context=ctx,
            handlers={name: self._run for name in NAMES},
            retries=RetryPolicy(max_attempts=MAX_ATTEMPTS, delay=lambda attempt: RETRY_MS),
            alarm_min_delay_ms=MIN_DELAY_MS,
            alarm_concurrency=1,
        )

    async def _run(self, info: DurableAlarmInfo) -> None:
        planned = self.plan.outcomes[info.name]
        outcome = planned.pop(0) if planned else "ok"
        if outcome == "crash" and info.attempt >= MAX_ATTEMPTS:
            outcome = "fail"  # A crash of the last attempt has no one answer to model.
        self.plan.deliveries.append(
            (
                durability.now_ms(),
                info.name,
                info.scheduled_time,
                info.attempt,
                info.idempotency_key,
                outcome,
            )
        )
        if outcome == "fail":
            raise RuntimeError(f"planned failure of {info.name}")
        if outcome == "crash":
            assert self.plan.runtime is not None
            await self.plan.runtime.crash(self.ctx.id)

    async def schedule(self, name: str, at: int) -> None:
        await self.alarms.named(name)(at)

    async def rows(self) -> list[list[Any]]:
        cursor = self.ctx.storage.sql.exec(
            "SELECT name, status, scheduled_at, attempt FROM durability_alarms ORDER BY name"
        )
        return [list(row) for row in cursor.raw()]

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.alarms.alarm(info)


@dataclass
class Occurrence:
    """The model of one scheduled occurrence."""

    scheduled: int
    due: int
    attempts: int = 0
    key: str | None = None
    failed: bool = False
    interrupted: bool = False
    """An attempt had its effect, then the object crashed before recording it."""


class AlarmsModel(RuleBasedStateMachine):
    """One object's named alarms in a real file-backed runtime, beside the model."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = VirtualClock(START_MS)
        self.directory = tempfile.TemporaryDirectory()
        self.plan = Plan()
        self.rt = Runtime(
            path=self.directory.name,
            bindings={"OBJ": Alarmed, "PLAN": self.plan},
            clock=self.clock,
        )
        self.plan.runtime = self.rt
        self.run(self.rt.start())
        self.stub = self.rt.env.OBJ.get_by_name("alarmed")
        self.model: dict[str, Occurrence] = {}
        self.keys: set[str] = set()
        self.seen = 0
        self.crashed_at: int | None = None
        self.crash_streak = 0
        """Attempts in a row whose crash cut their `alarm()` call short: the runtime
        retries that call with backoff, so due work may wait that long too."""

    def run(self, awaitable: Any) -> Any:
        return self.loop.run_until_complete(awaitable)

    def teardown(self) -> None:
        self.run(self.rt.close())
        self.loop.close()
        self.directory.cleanup()

    @rule(name=st.sampled_from(NAMES), ahead=st.integers(0, 8_000))
    def schedule(self, name: str, ahead: int) -> None:
        at = self.clock.now_ms() + ahead
        self.run(self.stub.schedule(name, at))
        self.model[name] = Occurrence(scheduled=at, due=at)

    @rule(
        name=st.sampled_from(NAMES),
        outcomes=st.lists(st.sampled_from(["ok", "fail", "crash"]), min_size=1, max_size=3),
    )
    def plan_attempts(self, name: str, outcomes: list[str]) -> None:
        self.plan.outcomes[name] += outcomes

    @rule(ms=st.integers(1, 6_000))
    def advance(self, ms: int) -> None:
        self.run(self.clock.advance(ms))
        self.check_deliveries()
        now = self.clock.now_ms()
        for name, occurrence in self.model.items():
            if not occurrence.failed:
                late = max(occurrence.due, self.alarm_retry_at()) + LATE_MS <= now
                assert not late, f"{name} due at {occurrence.due} not run by {now}"

    def alarm_retry_at(self) -> int:
        """When the runtime retries an `alarm()` call cut short by the last crashes."""
        if not self.crash_streak or self.crashed_at is None:
            return 0
        return self.crashed_at + ALARM_RETRY_MS * 2 ** (self.crash_streak - 1)

    @rule()
    def evict(self) -> None:
        self.run(self.rt.evict(self.stub))

    @rule()
    def crash(self) -> None:
        self.run(self.rt.crash(self.stub))

    def check_deliveries(self) -> None:
        """Apply each new delivery to the model, checking it was due and in order."""
        for at, name, scheduled, attempt, key, outcome in self.plan.deliveries[self.seen :]:
            occurrence = self.model.get(name)
            assert occurrence is not None and not occurrence.failed, f"{name} ran unscheduled"
            assert scheduled == occurrence.scheduled, (name, scheduled, occurrence)
            assert at >= occurrence.due, f"{name} attempt {attempt} ran early at {at}"
            assert attempt == occurrence.attempts + 1, (name, attempt, occurrence)
            if occurrence.key is None:
                assert key not in self.keys, f"{name}: a new occurrence reused {key}"
                occurrence.key = key
                self.keys.add(key)
            assert key == occurrence.key, f"{name}: the key changed between attempts"
            occurrence.attempts = attempt
            occurrence.interrupted = outcome == "crash"
            self.crashed_at = at if outcome == "crash" else self.crashed_at
            self.crash_streak = self.crash_streak + 1 if outcome == "crash" else 0
            if outcome == "ok":
                del self.model[name]
            elif outcome == "fail":
                occurrence.failed = attempt >= MAX_ATTEMPTS
                occurrence.due = at + RETRY_MS
            else:
                occurrence.due = at
        self.seen = len(self.plan.deliveries)

    @invariant()
    def stored_rows_match(self) -> None:
        self.run(self.clock.run_until_idle())
        self.check_deliveries()
        rows = {row[0]: row[1:] for row in self.run(self.stub.rows())}
        assert set(rows) == set(self.model), (rows, self.model)
        for name, (status, scheduled_at, attempt) in rows.items():
            occurrence = self.model[name]
            assert scheduled_at == occurrence.scheduled, (name, rows[name])
            if occurrence.failed:
                assert status == "failed", (name, rows[name])
            elif occurrence.interrupted:
                assert status in ("pending", "running"), (name, rows[name])
            else:
                assert (status, attempt) == ("pending", occurrence.attempts), (name, rows[name])


AlarmsModel.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestNamedAlarmsModel = AlarmsModel.TestCase
TestNamedAlarmsModel.__doc__ = "Named alarms follow the model under faults, time and restarts."
