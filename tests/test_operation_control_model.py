"""A stateful property test: operation control against a small model of its rules.

Hypothesis drives registrations (now or delayed), cancels, retries, handlers that
complete or fail, time and evictions/crashes against one object on the embedded runtime
under a virtual clock. After every step the stored records (read with `list`) must
match the model: a call is terminal only as its handler decided, never ran before it
was due, ran once per registration or retry with attempt 1, and was not left pending
long after it was due.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, rule

from _probe import Probe
from conftest import START_MS
from durability import Durability, DurableCall, NonRetryableError
from durability.runtime import DurableObject, Runtime
from durability.testing import VirtualClock

pytestmark = pytest.mark.slow

IDS = ("a", "b", "c", "d")
MIN_DELAY_MS = 1_000
LATE_MS = 2 * MIN_DELAY_MS
"""How long after its due time a call may still be pending (after an eviction the
fallback alarm, not the early timer, starts it)."""

Outcome = str  # "complete" or "fail"


def fail_for_good(call: DurableCall) -> str:
    """What a handler told to fail does."""
    raise NonRetryableError("told to fail")


class Modelled(DurableObject):
    """One operation whose handler completes or fails for good as the probe says."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.probe: Probe = env["PROBE"]
        self.durability = Durability(
            context=ctx, handlers={"work": self._work}, alarm_min_delay_ms=MIN_DELAY_MS
        )

    def _work(self, call: DurableCall) -> str:
        return str(self.probe.attempt_now(call, "done"))

    async def register(self, id: str, delay_ms: int) -> None:
        await self.durability.work(id, None, delay_ms=delay_ms)

    async def cancel(self, id: str) -> bool:
        return await self.durability.work.cancel(id)

    async def retry(self, id: str) -> bool:
        return await self.durability.work.retry(id)

    async def listing(self, status: str | None, after: str | None) -> list[dict[str, Any]]:
        found = await self.durability.work.list(status=status, limit=2, after=after)
        return [dataclasses.asdict(result) for result in found]

    async def alarm(self, info: Any = None) -> None:
        await self.durability.alarm(info)


@dataclasses.dataclass
class Record:
    """The model of one call: its status, when its current generation is due, and what
    its handler will do."""

    status: str
    due: int
    outcome: Outcome
    ran: bool = False


class OperationControlModel(RuleBasedStateMachine):
    """The real object beside the model of its calls."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = VirtualClock(START_MS)
        self.probe = Probe()
        self.rt = Runtime(bindings={"M": Modelled, "PROBE": self.probe}, clock=self.clock)
        self.run(self.rt.start())
        self.obj = self.rt.env.M.get_by_name("m")
        self.records: dict[str, Record] = {}
        self.seen_calls = 0

    def tell(self, id: str, outcome: Outcome) -> None:
        """Make the handler of `id` complete, or fail for good, as `outcome` says."""
        if outcome == "fail":
            self.probe.behaviour[id] = fail_for_good
        else:
            self.probe.behaviour.pop(id, None)

    def run(self, awaitable: Any) -> Any:
        return self.loop.run_until_complete(awaitable)

    def teardown(self) -> None:
        self.run(self.rt.close())
        self.loop.close()

    # -- rules ---------------------------------------------------------------------------

    @rule(
        id=st.sampled_from(IDS),
        delay=st.sampled_from([0, 500, 5_000, 30_000]),
        outcome=st.sampled_from(["complete", "fail"]),
    )
    def register(self, id: str, delay: int, outcome: Outcome) -> None:
        if id not in self.records:
            self.records[id] = Record("pending", self.clock.now_ms() + delay, outcome)
            self.tell(id, outcome)
        self.run(self.obj.register(id, delay))
        self.check()

    @rule(id=st.sampled_from(IDS))
    def cancel(self, id: str) -> None:
        record = self.records.get(id)
        expected = record is not None and record.status == "pending"
        assert self.run(self.obj.cancel(id)) is expected
        if record is not None and expected:
            record.status = "cancelled"
        self.check()

    @rule(id=st.sampled_from(IDS), outcome=st.sampled_from(["complete", "fail"]))
    def retry(self, id: str, outcome: Outcome) -> None:
        record = self.records.get(id)
        expected = record is not None and record.status in ("failed", "cancelled")
        if record is not None and expected:
            self.tell(id, outcome)
        assert self.run(self.obj.retry(id)) is expected
        if record is not None and expected:
            self.records[id] = Record("pending", self.clock.now_ms(), outcome)
        self.check()

    @rule(ms=st.sampled_from([0, 400, 1_000, 5_000, 30_000]))
    def advance(self, ms: int) -> None:
        self.run(self.clock.advance(ms))
        self.check()

    @rule(crash=st.booleans())
    def evict(self, crash: bool) -> None:
        self.run(self.rt.crash(self.obj) if crash else self.rt.evict(self.obj))
        self.check()

    # -- the comparison ------------------------------------------------------------------

    def check(self) -> None:
        """Let ready work run, then compare every stored call with the model."""
        self.run(self.clock.run_until_idle())
        now = self.clock.now_ms()
        for id, attempt, at in self.probe.calls[self.seen_calls :]:
            record = self.records[id]
            assert record.status == "pending" and not record.ran, f"{id} ran when not pending"
            assert attempt == 1 and at >= record.due, f"{id} ran early or as attempt {attempt}"
            record.ran = True
        self.seen_calls = len(self.probe.calls)
        stored = {row["id"]: row for row in self.read_all(None)}
        assert set(stored) == set(self.records)
        for id, record in self.records.items():
            row = stored[id]
            if record.status == "pending" and row["status"] != "pending":
                assert record.ran, f"{id} settled without running"
                record.status = "completed" if record.outcome == "complete" else "failed"
            assert row["status"] == record.status, f"{id}: {row['status']} != {record.status}"
            assert row["id"] == id and row["operation"] == "work"
            if record.status == "pending":
                assert now < record.due + LATE_MS, f"{id} still pending long after due"
                assert row["attempt"] == 0 and row["next_attempt_at"] == record.due
            elif record.status in ("completed", "failed"):
                assert row["attempt"] == 1
        for status in ("pending", "completed", "failed", "cancelled"):
            expected = sorted(id for id, r in self.records.items() if r.status == status)
            assert [row["id"] for row in self.read_all(status)] == expected

    def read_all(self, status: str | None) -> list[dict[str, Any]]:
        """Every page of `list` (two per page) for `status`, in order."""
        rows: list[dict[str, Any]] = []
        after = None
        while True:
            page = self.run(self.obj.listing(status, after))
            rows.extend(page)
            if len(page) < 2:
                return rows
            after = page[-1]["id"]


OperationControlModel.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestOperationControlModel = OperationControlModel.TestCase
