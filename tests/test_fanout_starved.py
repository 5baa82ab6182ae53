"""Fanout when every permit is held: the loop stays idle, work resumes once they free."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from _lab import open_lab
from durability import (
    Durability,
    DurabilityFanout,
    DurabilityScheduler,
    DurableCall,
    FanoutInput,
    FanoutMessage,
    FanoutTarget,
)
from durability.runtime import AlarmInvocationInfo, DurableObject

TIMEOUT_MS = 60_000


@dataclass
class Probe:
    """Options of the next instance and what it saw: deliveries, passes, transactions."""

    live_timers: bool = True
    blocked: set[str] = field(default_factory=lambda: {"audit"})
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    delivered: list[tuple[str, str, int]] = field(default_factory=list)
    operations: list[str] = field(default_factory=list)
    passes: int = 0
    transactions: int = 0


class _Storage:
    """The object's storage, counting the transactions that reach it."""

    def __init__(self, storage: Any, probe: Probe) -> None:
        self._storage = storage
        self._probe = probe

    def __getattr__(self, name: str) -> Any:
        return getattr(self._storage, name)

    async def transaction(self, body: Any) -> Any:
        self._probe.transactions += 1
        return await self._storage.transaction(body)


class Starved(DurableObject):
    """A fanout to two consumers on a one-permit scheduler, with operations if asked."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        probe: Probe = env["PROBE"]
        self.probe = probe
        context = SimpleNamespace(
            id=ctx.id, storage=_Storage(ctx.storage, probe), wait_until=ctx.wait_until
        )
        self.scheduler = DurabilityScheduler(
            context=context, alarm_concurrency=1, live_timers=probe.live_timers
        )
        self.fanout: DurabilityFanout[int] = DurabilityFanout(
            scheduler=self.scheduler,
            targets={
                name: FanoutTarget(deliver=self._consumer(name)) for name in ("email", "audit")
            },
            attempt_timeout_ms=TIMEOUT_MS,
        )
        self.durability = Durability(scheduler=self.scheduler, handlers={"work": self._work})
        run_due = self.fanout._run_due

        async def counted(now: int, info: AlarmInvocationInfo | None) -> None:
            probe.passes += 1
            await run_due(now, info)

        self.fanout._run_due = counted  # type: ignore[method-assign]

    def _consumer(self, name: str) -> Any:
        async def deliver(messages: Sequence[FanoutMessage[int]]) -> None:
            self.probe.delivered += [(name, m.id, m.attempt) for m in messages]
            if name in self.probe.blocked:
                await self.probe.gate.wait()
            for message in messages:
                await message.ack()

        return deliver

    async def _work(self, call: DurableCall) -> None:
        self.probe.operations.append(str(call.id))
        await self.probe.gate.wait()

    async def enqueue(self, *ids: str) -> None:
        result = await self.fanout.enqueue([FanoutInput(0, id=id) for id in ids])
        assert result.success

    async def work(self, id: str) -> None:
        await self.durability.work(id=id)

    async def rows(self) -> list[tuple[str, str, int]]:
        found = self.ctx.storage.sql.exec(
            "SELECT d.target_id, m.id, d.attempt FROM durability_fanout_deliveries AS d "
            "JOIN durability_fanout_messages AS m ON m.key = d.message_key ORDER BY d.seq"
        ).raw()
        return [(str(row[0]), str(row[1]), int(row[2])) for row in found]

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.scheduler.alarm(info)


def delivered(probe: Probe, target: str) -> list[tuple[str, int]]:
    return [(id, attempt) for name, id, attempt in probe.delivered if name == target]


@pytest.mark.parametrize("live_timers", [False, True])
async def test_blocked_consumer_holding_the_permit_leaves_the_loop_idle(live_timers: bool) -> None:
    """Enqueues behind a consumer holding the one permit cost their own commits, no passes."""
    probe = Probe(live_timers=live_timers)
    async with open_lab("OBJ", Starved, probe) as t:
        await t.obj.enqueue("m0")
        await t.clock.run_until_idle()
        passes, transactions = probe.passes, probe.transactions
        for number in range(1, 21):
            await t.obj.enqueue(f"m{number}")
        await t.clock.run_until_idle()
        await t.clock.advance(10_000)
        assert probe.passes - passes <= 1
        assert probe.transactions - transactions <= 20 + 3
        assert probe.delivered == [("audit", "m0", 1)]
        probe.gate.set()
        await t.clock.run_until_idle()
        ids = [f"m{number}" for number in range(21)]
        assert [id for id, _ in delivered(probe, "email")] == ids
        assert [id for id, _ in delivered(probe, "audit")] == ids
        assert await t.obj.rows() == []


async def test_a_claim_held_by_a_blocked_consumer_is_due_again_after_the_attempt_timeout() -> None:
    """The lease ends with the attempt timeout: the blocked batch is retried as attempt 2."""
    probe = Probe()
    async with open_lab("OBJ", Starved, probe) as t:
        await t.obj.enqueue("m0")
        await t.obj.enqueue("m1")
        await t.clock.run_until_idle()
        assert probe.delivered == [("audit", "m0", 1)]
        await t.clock.advance(TIMEOUT_MS)
        assert delivered(probe, "email") == [("m0", 1), ("m1", 1)]
        assert delivered(probe, "audit") == [("m0", 1), ("m1", 1)]
        probe.gate.set()
        await t.clock.advance(10 * TIMEOUT_MS)
        assert delivered(probe, "audit") == [("m0", 1), ("m1", 1), ("m0", 2)]
        assert await t.obj.rows() == []


@pytest.mark.parametrize("live_timers", [False, True])
@pytest.mark.parametrize("first", ["operation", "fanout"])
async def test_fanout_and_operations_sharing_one_permit_leave_the_loop_idle(
    live_timers: bool, first: str
) -> None:
    """Whichever helper holds the one permit, the other's waiting work costs no passes."""
    probe = Probe(live_timers=live_timers, blocked={"email", "audit"})
    async with open_lab("OBJ", Starved, probe) as t:
        if first == "operation":
            await t.obj.work("a")
        else:
            await t.obj.enqueue("m0")
        await t.clock.run_until_idle()
        passes, transactions = probe.passes, probe.transactions
        await t.obj.work("b")
        for number in range(1, 11):
            await t.obj.enqueue(f"m{number}")
        await t.clock.run_until_idle()
        await t.clock.advance(10_000)
        assert probe.passes - passes <= 2
        assert probe.transactions - transactions <= 11 + 3
        assert len(probe.delivered) + len(probe.operations) == 1
        probe.gate.set()
        await t.clock.run_until_idle()
        assert sorted(probe.operations) == (["a", "b"] if first == "operation" else ["b"])
        assert len(delivered(probe, "email")) == len(delivered(probe, "audit"))
        assert {id for _, id, _ in probe.delivered} >= {f"m{n}" for n in range(1, 11)}
        assert await t.obj.rows() == []
