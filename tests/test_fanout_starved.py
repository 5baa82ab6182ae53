"""Fanout when every permit is held: the loop stays idle, work resumes once they free."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from _lab import open_lab
from _probe import Probe
from durability import (
    Durability,
    DurabilityFanout,
    DurabilityScheduler,
    DurableCall,
    FanoutInput,
    FanoutMessage,
    FanoutTarget,
    now_ms,
)
from durability.runtime import AlarmInvocationInfo, DurableObject

TIMEOUT_MS = 60_000


class StarvedProbe(Probe):
    """The probe, blocking the consumers in `blocked` and the operation "work" until the
    test opens the gate "release"; it counts the fanout's passes and the transactions."""

    def __init__(self, live_timers: bool = True, blocked: frozenset[str] = frozenset({"audit"})):
        super().__init__()
        self.scheduler_options = {"alarm_concurrency": 1, "live_timers": live_timers}
        for key in (*blocked, "work"):
            self.behaviour[key] = self.parked("release")
        self.delivered: list[tuple[str, str, int]] = []
        self.passes = 0
        self.transactions = 0

    def operations(self) -> list[str]:
        """The ids of the operations that started, in order."""
        return [id for id, _, _ in self.calls]


class _Storage:
    """The object's storage, counting the transactions that reach it."""

    def __init__(self, storage: Any, probe: StarvedProbe) -> None:
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
        probe: StarvedProbe = env["PROBE"]
        self.probe = probe
        context = SimpleNamespace(
            id=ctx.id, storage=_Storage(ctx.storage, probe), wait_until=ctx.wait_until
        )
        self.scheduler = DurabilityScheduler(context=context, **probe.scheduler_options)
        self.fanout: DurabilityFanout[int] = DurabilityFanout(
            scheduler=self.scheduler,
            targets={
                name: FanoutTarget(deliver=self._consumer(name)) for name in ("email", "audit")
            },
            attempt_timeout_ms=TIMEOUT_MS,
        )
        self.durability = Durability(scheduler=self.scheduler, handlers={"work": self._work})
        run_due = self.fanout._run_due

        async def counted(now: int, info: Any) -> None:
            probe.passes += 1
            await run_due(now, info)

        self.fanout._run_due = counted  # type: ignore[method-assign]

    def _consumer(self, name: str) -> Any:
        async def deliver(messages: Sequence[FanoutMessage[int]]) -> None:
            self.probe.delivered += [(name, m.id, m.attempt) for m in messages]
            await self.probe.run(name, messages)
            for message in messages:
                await message.ack()

        return deliver

    async def _work(self, call: DurableCall) -> None:
        self.probe.calls.append((call.id, call.attempt, now_ms()))
        await self.probe.run("work", call)

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


def delivered(probe: StarvedProbe, target: str) -> list[tuple[str, int]]:
    return [(id, attempt) for name, id, attempt in probe.delivered if name == target]


@pytest.mark.parametrize("live_timers", [False, True])
async def test_blocked_consumer_holding_the_permit_leaves_the_loop_idle(live_timers: bool) -> None:
    """Enqueues behind a consumer holding the one permit cost their own commits, no passes."""
    probe = StarvedProbe(live_timers=live_timers)
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
        probe.gate("release").set()
        await t.clock.run_until_idle()
        ids = [f"m{number}" for number in range(21)]
        assert [id for id, _ in delivered(probe, "email")] == ids
        assert [id for id, _ in delivered(probe, "audit")] == ids
        assert await t.obj.rows() == []


async def test_a_claim_held_by_a_blocked_consumer_is_due_again_after_the_attempt_timeout() -> None:
    """The lease ends with the attempt timeout: the blocked batch is retried as attempt 2."""
    probe = StarvedProbe()
    async with open_lab("OBJ", Starved, probe) as t:
        await t.obj.enqueue("m0")
        await t.obj.enqueue("m1")
        await t.clock.run_until_idle()
        assert probe.delivered == [("audit", "m0", 1)]
        await t.clock.advance(TIMEOUT_MS)
        assert delivered(probe, "email") == [("m0", 1), ("m1", 1)]
        assert delivered(probe, "audit") == [("m0", 1), ("m1", 1)]
        probe.gate("release").set()
        await t.clock.advance(10 * TIMEOUT_MS)
        assert delivered(probe, "audit") == [("m0", 1), ("m1", 1), ("m0", 2)]
        assert await t.obj.rows() == []


@pytest.mark.parametrize("live_timers", [False, True])
@pytest.mark.parametrize("first", ["operation", "fanout"])
async def test_fanout_and_operations_sharing_one_permit_leave_the_loop_idle(
    live_timers: bool, first: str
) -> None:
    """Whichever helper holds the one permit, the other's waiting work costs no passes."""
    probe = StarvedProbe(live_timers=live_timers, blocked=frozenset({"email", "audit"}))
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
        assert len(probe.delivered) + len(probe.operations()) == 1
        probe.gate("release").set()
        await t.clock.run_until_idle()
        assert sorted(probe.operations()) == (["a", "b"] if first == "operation" else ["b"])
        assert len(delivered(probe, "email")) == len(delivered(probe, "audit"))
        assert {id for _, id, _ in probe.delivered} >= {f"m{n}" for n in range(1, 11)}
        assert await t.obj.rows() == []
