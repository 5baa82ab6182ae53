"""Fanout across eviction and restart, changed targets, a shared scheduler, migrations."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from _fanout_host import FanoutProbe, Hub, bodies, hub
from _lab import Lab
from conftest import START_MS, MakeRuntime
from durability import (
    LATEST,
    Durability,
    DurabilityAlarms,
    DurabilityFanout,
    DurabilityScheduler,
    DurableAlarmInfo,
    DurableCall,
    FanoutInput,
    FanoutMessage,
    FanoutTarget,
    RetryPolicy,
    SerializedError,
    StoredFailure,
    now_ms,
)
from durability._fanout.executor import DeliveryExecutor
from durability.runtime import AlarmInvocationInfo, DurableObject
from durability.testing import VirtualClock


async def _hang(messages: Sequence[FanoutMessage[Any]]) -> None:
    await asyncio.Event().wait()


async def test_claim_is_a_lease_and_an_evicted_attempt_counts() -> None:
    """Evicted mid-delivery, the message is due again after the attempt timeout, as attempt 2."""
    probe = FanoutProbe(consumers={"email": {"attempt_timeout_ms": 30_000}})
    probe.behaviour["email"] = _hang
    async with hub(probe) as t:
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        await t.rt.evict(t.obj)
        probe.behaviour.clear()
        await t.clock.advance(29_999)
        assert probe.delivered("email") == [("m1", 1)]
        await t.clock.advance(1)
        assert probe.delivered("email") == [("m1", 1), ("m1", 2)]
        assert await t.obj.rows() == []


def _hanging_single_attempt() -> FanoutProbe:
    """A fanout with a DLQ and one target, "email", allowed 1 attempt, that never settles."""
    probe = FanoutProbe(
        consumers={"email": {"attempt_timeout_ms": 30_000, "retries": RetryPolicy(max_attempts=1)}},
        use_dlq=True,
    )
    probe.behaviour["email"] = _hang
    return probe


async def _enqueue_and_evict(t: Lab[FanoutProbe]) -> None:
    """Enqueue message m1 and evict the object while its first attempt is delivered."""
    await t.obj.enqueue(bodies("x"))
    await t.clock.run_until_idle()
    await t.rt.evict(t.obj)


async def test_interrupted_final_attempt_is_dead_lettered_once_interrupted_alone() -> None:
    """With max_attempts=1, an attempt cut off beside others is spared: the message is
    delivered again alone; cut off alone too, it is dead-lettered as `interrupted`."""
    probe = _hanging_single_attempt()
    async with hub(probe) as t:
        await _enqueue_and_evict(t)
        await t.clock.advance(30_000)
        assert probe.delivered("email") == [("m1", 1), ("m1", 2)]
        await t.rt.evict(t.obj)
        await t.clock.advance(30_000)
        assert probe.delivered("email") == [("m1", 1), ("m1", 2)]
        [dead] = probe.dead
        assert dead.failure == StoredFailure(
            reason="interrupted",
            error=SerializedError(
                "DurableAttemptsExhaustedError",
                'Fanout message "m1" to target "email" exhausted its 1 attempts (2 '
                "interrupted: the process stopped or the object was evicted while it was "
                "delivered)",
            ),
        )
        assert dead.attempts == 2
        assert await t.obj.rows() == []


async def test_messages_survive_a_restart_of_the_runtime(
    tmp_path: Path, make_runtime: MakeRuntime
) -> None:
    """Accepted messages not yet delivered are delivered by the alarm after a restart."""
    probe = FanoutProbe(consumers={"email": {}}, options={"batch_delay_ms": 60_000})
    clock = VirtualClock(START_MS + 1)
    async with make_runtime(
        bindings={"HUB": Hub, "PROBE": probe}, clock=clock, path=tmp_path
    ) as rt:
        result = await rt.env.HUB.get_by_name("a").enqueue(bodies("x"))
        assert result["success"] is True
    assert probe.batches == []
    async with make_runtime(
        bindings={"HUB": Hub, "PROBE": probe}, clock=clock, path=tmp_path
    ) as rt:
        await clock.advance_to(START_MS + 60_000)
        assert probe.delivered("email") == [("m1", 1)]


async def test_removed_target_keeps_its_work_and_new_targets_get_only_new_messages(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A target dropped from the config keeps its rows (retried each minute) until it returns."""
    probe = FanoutProbe(options={"batch_delay_ms": 60_000})
    async with hub(probe) as t:
        await t.clock.advance(1)
        await t.obj.enqueue(bodies("x"))
        probe.consumers = {"email": {}}
        await t.rt.evict(t.obj)
        boundary = -(-(START_MS + 1) // 60_000) * 60_000
        with caplog.at_level(logging.ERROR, logger="durability"):
            await t.clock.advance_to(boundary)
        assert probe.delivered("email") == [("m1", 1)]
        [row] = await t.obj.rows()
        assert (row["target_id"], row["attempt"], row["next_attempt_at"]) == (
            "audit",
            0,
            boundary + 60_000,
        )
        missing = [
            r
            for r in caplog.records
            if getattr(r, "event", "") == "durability.fanout.target_missing"
        ]
        assert (
            missing
            and 'Target "audit" is no longer configured; retaining work' in missing[0].getMessage()
        )
        probe.consumers = {"email": {}, "audit": {}, "sms": {}}
        await t.rt.evict(t.obj)
        await t.clock.advance_to(boundary + 60_000)
        assert probe.delivered("audit") == [("m1", 1)]
        assert probe.delivered("sms") == []
        assert await t.obj.manifests() == []
        await t.obj.enqueue([{"id": "m2", "body": "y"}])
        await t.clock.advance_to(boundary + 120_000)
        assert probe.delivered("sms") == [("m2", 1)]


async def test_physical_alarm_follows_the_earliest_pending_delivery() -> None:
    """A retry an hour away arms the alarm there; nothing pending clears it."""
    probe = FanoutProbe(consumers={"email": {}})

    async def later(messages: Sequence[FanoutMessage[Any]]) -> None:
        if messages[0].attempt == 1:
            await messages[0].retry(3_600_000)
        else:
            await messages[0].ack()

    probe.behaviour["email"] = later
    async with hub(probe) as t:
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        assert await t.obj.alarm_at() == START_MS + 3_600_000
        await t.clock.advance(3_600_000)
        assert probe.delivered("email") == [("m1", 1), ("m1", 2)]
        assert await t.obj.alarm_at() is None


class Shared(DurableObject):
    """Operations, named alarms and a fanout on one scheduler (one physical alarm)."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.log: list[tuple[str, int]] = env["PROBE"]
        self.scheduler = DurabilityScheduler(context=ctx)
        self.operations = Durability(scheduler=self.scheduler, handlers={"charge": self._charge})
        self.alarms = DurabilityAlarms(scheduler=self.scheduler, handlers={"renew": self._renew})
        self.fanout: DurabilityFanout[Any] = DurabilityFanout(
            scheduler=self.scheduler, targets={"email": FanoutTarget(deliver=self._deliver)}
        )

    def _charge(self, call: DurableCall) -> None:
        self.log.append(("charge", call.attempt))
        if call.attempt == 1:
            raise RuntimeError("declined")

    def _renew(self, info: DurableAlarmInfo) -> None:
        self.log.append(("renew", info.attempt))

    async def _deliver(self, messages: Sequence[FanoutMessage[Any]]) -> None:
        for message in messages:
            self.log.append(("email", message.attempt))
            if message.attempt == 1:
                await message.retry(1_200_000)
            else:
                await message.ack()

    async def start(self) -> None:
        await self.operations.charge(id="c1")
        await self.alarms.renew(now_ms() + 3_600_000)
        await self.fanout.enqueue(FanoutInput(id="m1", body="x"))

    async def second_fanout(self) -> str:
        try:
            DurabilityFanout(
                scheduler=self.scheduler, targets={"a": FanoutTarget(deliver=self._deliver)}
            )
        except ValueError as error:
            return str(error)
        return "accepted"

    async def alarm_at(self) -> int | None:
        return await self.ctx.storage.get_alarm()

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.scheduler.alarm(info)


async def test_fanout_operations_and_named_alarms_share_one_scheduler_and_alarm(
    make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """One alarm serves all three: it always sits at the earliest pending work of any helper."""
    log: list[tuple[str, int]] = []
    async with make_runtime(bindings={"SHARED": Shared, "PROBE": log}) as rt:
        stub = rt.env.SHARED.get_by_name("a")
        await stub.start()
        await clock.run_until_idle()
        assert sorted(log) == [("charge", 1), ("email", 1)]
        # The operation's retry (within seconds) comes first, then the fanout's, then renew.
        retry_at = await stub.alarm_at()
        assert retry_at is not None and retry_at <= START_MS + 15_000
        await clock.advance(60_000)
        assert ("charge", 2) in log
        assert await stub.alarm_at() == START_MS + 1_200_000
        await rt.evict(stub)
        await clock.advance_to(START_MS + 1_200_000)
        assert log[-1] == ("email", 2)
        assert await stub.alarm_at() == START_MS + 3_600_000
        await clock.advance_to(START_MS + 3_600_000)
        assert log[-1] == ("renew", 1)
        assert await stub.alarm_at() is None
        assert (
            await stub.second_fanout()
            == "A DurabilityFanout helper is already attached to this scheduler"
        )


class Schema(DurableObject):
    """An object that only migrates the fanout schema."""

    async def migrate(self, target: str | None) -> dict[str, Any]:
        result = DurabilityFanout.migrate(self.ctx, LATEST if target == "latest" else target)
        tables = self.ctx.storage.sql.exec(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND name LIKE 'durability_fanout%' ORDER BY name"
        ).to_list()
        return {
            "applied": list(result.applied),
            "rolled_back": list(result.rolled_back),
            "tables": [row["name"] for row in tables],
        }


async def test_migrate_creates_and_drops_the_fanout_tables(make_runtime: MakeRuntime) -> None:
    """migrate(LATEST) creates the three tables (with the lean delivery indexes);
    migrate(None) drops them again."""
    async with make_runtime(bindings={"SCHEMA": Schema}) as rt:
        stub = rt.env.SCHEMA.get_by_name("a")
        up = await stub.migrate("latest")
        assert up == {
            "applied": [
                "durability_0005_create_fanout",
                "durability_0011_fanout_delivery_indexes",
                "durability_0016_fanout_interruptions",
            ],
            "rolled_back": [],
            "tables": [
                "durability_fanout_deliveries",
                "durability_fanout_messages",
                "durability_fanout_seq",
            ],
        }
        assert (await stub.migrate("latest"))["applied"] == []
        down = await stub.migrate(None)
        assert down == {
            "applied": [],
            "rolled_back": [
                "durability_0016_fanout_interruptions",
                "durability_0011_fanout_delivery_indexes",
                "durability_0005_create_fanout",
            ],
            "tables": [],
        }


async def test_a_suspect_out_of_attempts_settled_by_another_pass_is_left_to_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Two passes that read the same suspect out of attempts both settle it without a
    claim: the second finds the row gone and leaves it (no failure, one dead letter)."""
    settle = DeliveryExecutor._settle_suspect

    async def raced(executor: DeliveryExecutor, attempt: Any, row: Any) -> None:
        await settle(executor, attempt, row)  # the other pass, first
        await settle(executor, attempt, row)  # this pass, with the row it read before

    monkeypatch.setattr(DeliveryExecutor, "_settle_suspect", raced)
    probe = _hanging_single_attempt()
    async with hub(probe) as t:
        await _enqueue_and_evict(t)
        await t.clock.advance(30_000)
        await t.rt.evict(t.obj)
        with caplog.at_level(logging.ERROR):
            await t.clock.advance(30_000)
            await t.clock.run_until_idle()
        assert [dead.message_id for dead in probe.dead] == ["m1"]
        assert await t.obj.rows() == []
        assert [record.getMessage() for record in caplog.records] == []
