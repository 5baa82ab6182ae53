"""`storage.delete_all()` under live helpers: the object is as new, and nothing brings
the deleted work back (no handler, no alarm, no failing pass re-arming one); and an
eviction cutting a registration short leaves nothing behind either."""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

import pytest

from _fanout_host import FanoutProbe, Hub, bodies
from _lab import open_lab
from conftest import START_MS
from durability import (
    Durability,
    DurabilityAlarms,
    DurabilityLog,
    DurableAlarmInfo,
    DurableCall,
    LogAppendInput,
    RetryPolicy,
)
from durability.runtime import AlarmInvocationInfo, DurableObject


class Wiped(DurableObject):
    """Operations, named alarms and a log on one scheduler; `wipe` empties the object."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.probe: dict[str, Any] = env["PROBE"]
        self.durability = Durability(
            handlers={"charge": self._charge, "hold": self._hold}, context=ctx
        )
        self.alarms = DurabilityAlarms(handlers={"remind": self._remind}, context=ctx)
        self.log: DurabilityLog[Any] = DurabilityLog(context=ctx)

    def _charge(self, call: DurableCall[Any]) -> str:
        self.probe.setdefault("charged", []).append((call.id, call.attempt))
        return "charged"

    async def _hold(self, call: DurableCall[Any]) -> str:
        self.probe["held"] = call.signal
        await self.probe.setdefault("release", asyncio.Event()).wait()
        return "late"

    def _remind(self, info: DurableAlarmInfo) -> None:
        self.probe.setdefault("reminded", []).append(info.payload)

    async def charge(self, id: str, delay_ms: int = 0) -> None:
        await self.durability.charge(id, delay_ms=delay_ms)

    async def hold(self, id: str, delay_ms: int = 0) -> None:
        await self.durability.hold(id, delay_ms=delay_ms)

    async def result(self, id: str) -> list[Any]:
        found = await self.durability.charge.get_result(id)
        return [found.status, found.attempt, found.result]

    async def remind(self, at: int, payload: str) -> None:
        await self.alarms.remind(at, payload)

    async def append(self, *bodies: str) -> list[int]:
        result = await self.log.append([LogAppendInput(body) for body in bodies])
        assert result.value is not None
        return list(result.value)

    async def read(self) -> list[Any]:
        return [record.body for record in (await self.log.read(0)).records]

    async def wipe(self) -> None:
        await self.ctx.storage.delete_all()

    async def wipe_then_charge(self, id: str) -> None:
        await self.ctx.storage.delete_all()
        await self.durability.charge(id)

    async def alarm_at(self) -> int | None:
        return await self.ctx.storage.get_alarm()

    async def calls(self) -> int:
        return int(
            self.ctx.storage.sql.exec("SELECT COUNT(*) AS n FROM durability_calls").one()["n"]
        )

    async def downgrade(self) -> None:
        Durability.migrate(self.ctx, target="durability_0002_pending_index")

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.durability.alarm(info)


async def test_deleted_operations_and_alarms_never_run_and_the_alarm_stays_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Work deleted with the rows does not run, and no pass fails and re-arms the alarm."""
    probe: dict[str, Any] = {}
    caplog.set_level(logging.WARNING, logger="durability")
    async with open_lab("WIPED", Wiped, probe) as lab:
        await lab.obj.charge("later", 2_000)
        await lab.obj.remind(START_MS + 3_000, "soon")
        await lab.obj.remind(START_MS + 86_400_000, "tomorrow")
        await lab.obj.wipe()
        assert await lab.obj.alarm_at() is None
        for _ in range(3):
            await lab.clock.advance(100_000)
            assert await lab.obj.alarm_at() is None
        await lab.clock.advance(86_400_000)
        assert await lab.obj.alarm_at() is None
        assert "charged" not in probe and "reminded" not in probe
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_the_same_instance_keeps_working_after_delete_all() -> None:
    """Registrations, named alarms and appends made after the wipe, in the same instance
    (and in the same call), work as on a new object: offsets start again at 0."""
    probe: dict[str, Any] = {}
    async with open_lab("WIPED", Wiped, probe) as lab:
        await lab.obj.charge("a")
        await lab.clock.run_until_idle()
        assert await lab.obj.append("old-1", "old-2") == [0, 1]
        await lab.obj.wipe_then_charge("a")
        await lab.clock.run_until_idle()
        assert probe["charged"] == [("a", 1), ("a", 1)]  # the id is new again
        assert await lab.obj.result("a") == ["completed", 1, "charged"]
        await lab.obj.remind(START_MS + 5_000, "again")
        await lab.clock.advance(5_000)
        assert probe["reminded"] == ["again"]
        assert await lab.obj.append("new-1") == [0]
        assert await lab.obj.read() == ["new-1"]


async def test_a_running_handler_of_a_deleted_record_is_aborted_and_writes_nothing() -> None:
    """The attempt running when its row is deleted has its signal aborted; its outcome
    never recreates the record."""
    probe: dict[str, Any] = {}
    async with open_lab("WIPED", Wiped, probe) as lab:
        await lab.obj.hold("h")
        await lab.clock.advance(10)
        signal = probe["held"]
        assert not signal.aborted
        await lab.obj.wipe()
        assert signal.aborted
        assert "delete_all" in str(signal.reason)
        probe["release"].set()
        await lab.clock.advance(600_000)
        assert await lab.obj.calls() == 0
        assert await lab.obj.alarm_at() is None


async def test_a_pass_still_running_past_the_handoff_after_a_wipe_arms_no_alarm() -> None:
    """A pass whose handler outlives the hand-off time after `delete_all()` hands off
    nothing: its rows are gone, so it arms no alarm to come back for them."""

    class QuickHandoff(Wiped):
        def __init__(self, ctx: Any, env: Any) -> None:
            DurableObject.__init__(self, ctx, env)
            self.probe = env["PROBE"]
            self.durability = Durability(
                handlers={"hold": self._hold}, context=ctx, alarm_handoff_ms=5_000
            )

    probe: dict[str, Any] = {}
    async with open_lab("WIPED", QuickHandoff, probe) as lab:
        await lab.obj.hold("h", 100)  # due later: an alarm pass starts it
        await lab.clock.advance(200)
        assert not probe["held"].aborted
        await lab.obj.wipe()
        await lab.clock.advance(10_000)
        assert await lab.obj.alarm_at() is None
        probe["release"].set()
        await lab.clock.advance(600_000)
        assert await lab.obj.calls() == 0
        assert await lab.obj.alarm_at() is None


async def test_a_helper_that_cannot_make_its_tables_again_undoes_the_delete_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """If a helper's tables cannot be created again, `delete_all()` raises and drops
    nothing: the records and the alarm are as they were, and still run."""
    from durability._engine import engine

    probe: dict[str, Any] = {}
    async with open_lab("WIPED", Wiped, probe) as lab:
        await lab.obj.charge("kept", 2_000)
        armed = await lab.obj.alarm_at()

        def broken(*args: Any, **kwargs: Any) -> None:
            raise OSError("disk full")

        with monkeypatch.context() as patched:
            patched.setattr(engine, "migrate", broken)
            with pytest.raises(OSError, match="disk full"):
                await lab.obj.wipe()
        assert await lab.obj.calls() == 1
        assert await lab.obj.alarm_at() == armed
        await lab.clock.advance(2_000)
        assert probe["charged"] == [("kept", 1)]


async def test_a_users_downgrade_is_not_taken_for_a_wipe() -> None:
    """A pass failing on a schema the user moved back (not emptied) keeps the usual
    retry alarm, and the downgrade stays."""
    probe: dict[str, Any] = {}
    async with open_lab("WIPED", Wiped, probe) as lab:
        await lab.obj.charge("a", 2_000)
        await lab.obj.downgrade()
        await lab.clock.advance(2_000)
        assert await lab.obj.alarm_at() == START_MS + 2_000 + 15_000
        assert "charged" not in probe


class WipedHub(Hub):
    """The fanout test object, with a way to empty it."""

    async def wipe(self) -> None:
        await self.ctx.storage.delete_all()


async def test_a_delivery_in_flight_when_the_rows_go_ends_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A consumer still running when `delete_all()` removes its deliveries, then failing,
    retries nothing and arms no alarm."""
    probe = FanoutProbe()
    gate = asyncio.Event()

    async def fail_later(messages: Any) -> None:
        await gate.wait()
        raise RuntimeError("consumer down")

    probe.behaviour["audit"] = fail_later
    caplog.set_level(logging.WARNING, logger="durability")
    async with open_lab("HUB", WipedHub, probe) as lab:
        await lab.obj.enqueue(bodies("x"))
        await lab.clock.advance(10)
        await lab.obj.wipe()
        gate.set()
        await lab.clock.advance(60_000)
        assert await lab.obj.alarm_at() is None
        assert await lab.obj.rows() == []
        assert len(probe.delivered("audit")) == 1
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_fanout_deliveries_deleted_are_not_retried_and_the_count_starts_again() -> None:
    """Deliveries waiting for a retry are gone with the rows: the load reads 0, no target
    is called again, and messages enqueued afterwards are delivered."""
    probe = FanoutProbe(options={"retries": RetryPolicy(delay=lambda attempt: 5_000)})

    async def retry(messages: Any) -> None:
        for message in messages:
            await message.retry()

    probe.behaviour["audit"] = retry
    async with open_lab("HUB", WipedHub, probe) as lab:
        await lab.obj.enqueue(bodies("x"))
        await lab.clock.run_until_idle()
        assert await lab.obj.pending() == 1
        await lab.obj.wipe()
        assert await lab.obj.pending() == 0
        delivered = list(probe.batches)
        await lab.clock.advance(60_000)
        assert probe.batches == delivered
        assert await lab.obj.alarm_at() is None
        probe.behaviour.pop("audit")
        await lab.obj.enqueue(bodies("y"))
        await lab.clock.run_until_idle()
        assert probe.delivered("audit")[-1][1] == 1
        assert await lab.obj.pending() == 0


@pytest.mark.parametrize("turns", range(5))
async def test_an_eviction_racing_a_registration_leaves_no_task_error(
    turns: int, caplog: pytest.LogCaptureFixture
) -> None:
    """A registration cut short by `evict` answers with the eviction error, and asyncio
    reports no task whose exception nobody retrieved."""
    probe: dict[str, Any] = {}
    caplog.set_level(logging.ERROR, logger="asyncio")
    async with open_lab("WIPED", Wiped, probe) as lab:
        await lab.obj.alarm_at()
        call = asyncio.ensure_future(lab.obj.charge("x"))
        for _ in range(turns):
            await asyncio.sleep(0)
        await lab.rt.evict(lab.obj)
        try:
            await call
        except Exception as error:
            assert "evict" in str(error)
    gc.collect()
    await asyncio.sleep(0)
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []
