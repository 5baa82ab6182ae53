"""Alarm delivery on the virtual clock: timing, retries, single flight, replacement."""

from __future__ import annotations

import asyncio
import contextlib

from conftest import MakeRuntime
from durability import now_ms
from durability.runtime import AlarmInvocationInfo, DurableObject
from durability.testing import VirtualClock


class Script:
    """What the test wants `alarm()` to do, and what it saw."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, bool, int | None]] = []
        self.fail_times = 0
        self.rearm_in_ms: int | None = None
        self.hold: asyncio.Event | None = None
        self.running = 0
        self.max_running = 0


class Alarmed(DurableObject):
    async def arm(self, at_ms: int) -> None:
        await self.ctx.storage.set_alarm(at_ms)

    async def alarm_time(self) -> int | None:
        return await self.ctx.storage.get_alarm()

    async def alarm(self, info: AlarmInvocationInfo) -> None:
        script: Script = self.env.SCRIPT
        script.running += 1
        script.max_running = max(script.max_running, script.running)
        try:
            seen = await self.ctx.storage.get_alarm()
            script.calls.append((now_ms(), info.retry_count, info.is_retry, seen))
            if script.rearm_in_ms is not None:
                await self.ctx.storage.set_alarm(now_ms() + script.rearm_in_ms)
            if script.hold is not None:
                await script.hold.wait()
            if script.fail_times > 0:
                script.fail_times -= 1
                raise RuntimeError("alarm failed on purpose")
        finally:
            script.running -= 1


class NoArgument(DurableObject):
    async def arm(self, at_ms: int) -> None:
        await self.ctx.storage.set_alarm(at_ms)

    async def alarm(self) -> None:
        self.env.SCRIPT.calls.append((now_ms(), 0, False, None))


async def test_alarm_fires_at_its_time(make_runtime: MakeRuntime, clock: VirtualClock) -> None:
    """alarm() runs when the clock reaches the alarm time, not before, and only once."""
    script = Script()
    async with make_runtime(bindings={"A": Alarmed, "SCRIPT": script}) as rt:
        stub = rt.env.A.get_by_name("a")
        start = clock.now_ms()
        await stub.arm(start + 10_000)
        await clock.advance(9_999)
        assert script.calls == []
        await clock.advance(1)
        assert script.calls == [(start + 10_000, 0, False, None)]
        assert await stub.alarm_time() is None
        await clock.advance(600_000)
        assert len(script.calls) == 1


async def test_set_alarm_replaces_and_past_time_fires_now(
    make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """A second set_alarm replaces the first; a time in the past fires at once."""
    script = Script()
    async with make_runtime(bindings={"A": Alarmed, "SCRIPT": script}) as rt:
        stub = rt.env.A.get_by_name("a")
        start = clock.now_ms()
        await stub.arm(start + 5_000)
        await stub.arm(start + 8_000)
        await clock.advance(7_000)
        assert script.calls == []
        await clock.advance(1_000)
        assert [c[0] for c in script.calls] == [start + 8_000]
        await stub.arm(start - 1)
        await clock.run_until_idle()
        assert [c[0] for c in script.calls] == [start + 8_000, start + 8_000]


async def test_retry_schedule_and_drop_after_seven_calls(
    make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """A raising alarm() is retried after 2, 4, 8, 16, 32, 64 s, then dropped."""
    script = Script()
    script.fail_times = 100
    async with make_runtime(bindings={"A": Alarmed, "SCRIPT": script}) as rt:
        stub = rt.env.A.get_by_name("a")
        start = clock.now_ms()
        await stub.arm(start)
        await clock.advance(3_600_000)
        times = [c[0] - start for c in script.calls]
        assert times == [0, 2_000, 6_000, 14_000, 30_000, 62_000, 126_000]
        assert [(c[1], c[2]) for c in script.calls] == [(0, False)] + [
            (n, True) for n in range(1, 7)
        ]
        assert await stub.alarm_time() is None


async def test_retry_stops_after_a_success(make_runtime: MakeRuntime, clock: VirtualClock) -> None:
    """After a retry succeeds nothing else fires."""
    script = Script()
    script.fail_times = 2
    async with make_runtime(bindings={"A": Alarmed, "SCRIPT": script}) as rt:
        await rt.env.A.get_by_name("a").arm(clock.now_ms())
        await clock.advance(3_600_000)
        assert [c[1] for c in script.calls] == [0, 1, 2]


async def test_set_alarm_during_a_failing_alarm_replaces_the_retry(
    make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """An alarm set inside a raising alarm() stands, and no retry is made."""
    script = Script()
    script.fail_times = 1
    script.rearm_in_ms = 60_000
    async with make_runtime(bindings={"A": Alarmed, "SCRIPT": script}) as rt:
        stub = rt.env.A.get_by_name("a")
        start = clock.now_ms()
        await stub.arm(start)
        await clock.run_until_idle()
        assert await stub.alarm_time() == start + 60_000
        script.rearm_in_ms = None
        await clock.advance(3_600_000)
        assert [(c[0] - start, c[1]) for c in script.calls] == [(0, 0), (60_000, 0)]


async def test_alarms_are_single_flight(make_runtime: MakeRuntime, clock: VirtualClock) -> None:
    """An alarm that comes due while alarm() runs waits for it to finish."""
    script = Script()
    script.hold = hold = asyncio.Event()
    script.rearm_in_ms = 0
    async with make_runtime(bindings={"A": Alarmed, "SCRIPT": script}) as rt:
        await rt.env.A.get_by_name("a").arm(clock.now_ms())
        await clock.advance(1_000)
        assert len(script.calls) == 1 and script.running == 1
        script.rearm_in_ms = None
        script.hold = None
        hold.set()
        await clock.advance(1_000)
        assert len(script.calls) == 2
        assert script.max_running == 1


async def test_get_alarm_during_alarm_is_none(
    make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """Inside alarm(), get_alarm() is None unless set_alarm was called during the run."""
    script = Script()
    async with make_runtime(bindings={"A": Alarmed, "SCRIPT": script}) as rt:
        await rt.env.A.get_by_name("a").arm(clock.now_ms() + 1)
        await clock.advance(1)
        assert script.calls[0][3] is None


async def test_alarm_without_parameter(make_runtime: MakeRuntime, clock: VirtualClock) -> None:
    """An `alarm(self)` with no parameter is called without the info argument."""
    script = Script()
    async with make_runtime(bindings={"N": NoArgument, "SCRIPT": script}) as rt:
        await rt.env.N.get_by_name("a").arm(clock.now_ms() + 5)
        await clock.advance(5)
        assert len(script.calls) == 1


async def test_each_object_has_its_own_alarm(
    make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """Alarms of different objects fire independently, each at its own time."""
    script = Script()
    async with make_runtime(bindings={"A": Alarmed, "SCRIPT": script}) as rt:
        start = clock.now_ms()
        for index in range(5):
            await rt.env.A.get_by_name(f"o{index}").arm(start + 1_000 * (5 - index))
        await clock.advance(10_000)
        assert [c[0] - start for c in script.calls] == [1_000, 2_000, 3_000, 4_000, 5_000]


async def test_now_ms_inside_objects_follows_the_clock(
    make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """durability.now_ms() inside an object reads the runtime's virtual clock."""

    class Timer(DurableObject):
        async def now(self) -> int:
            return now_ms()

    async with make_runtime(bindings={"T": Timer}) as rt:
        await clock.advance(12_345)
        assert await rt.env.T.get_by_name("t").now() == clock.now_ms()


async def test_alarm_info_is_frozen() -> None:
    """AlarmInvocationInfo is an immutable value."""
    info = AlarmInvocationInfo(retry_count=1, is_retry=True)
    try:
        info.retry_count = 2  # type: ignore[misc]
    except AttributeError:
        pass
    else:
        raise AssertionError("AlarmInvocationInfo must be frozen")
    assert info == AlarmInvocationInfo(1, True)


class Undone(DurableObject):
    """Sets the alarm inside a transaction that is rolled back, or clears it that way."""

    async def arm(self, at_ms: int) -> None:
        await self.ctx.storage.set_alarm(at_ms)

    async def arm_and_abort(self, at_ms: int) -> int | None:
        async def body(txn: object) -> None:
            await self.ctx.storage.set_alarm(at_ms)
            raise LookupError("abort")

        with contextlib.suppress(LookupError):
            await self.ctx.storage.transaction(body)
        return await self.ctx.storage.get_alarm()

    async def clear_and_abort(self) -> int | None:
        async def body(txn: object) -> None:
            await self.ctx.storage.delete_alarm()
            raise LookupError("abort")

        with contextlib.suppress(LookupError):
            await self.ctx.storage.transaction(body)
        return await self.ctx.storage.get_alarm()

    async def alarm(self) -> None:
        self.env.SCRIPT.calls.append((now_ms(), 0, False, None))


async def test_alarm_changes_rolled_back_with_their_transaction(
    make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """set_alarm/delete_alarm undone by a transaction's rollback are undone everywhere:
    get_alarm() reports the earlier alarm, and only the earlier alarm fires."""
    script = Script()
    async with make_runtime(bindings={"U": Undone, "SCRIPT": script}) as rt:
        start = clock.now_ms()
        fresh = rt.env.U.get_by_name("fresh")
        assert await fresh.arm_and_abort(start + 1_000) is None
        armed = rt.env.U.get_by_name("armed")
        await armed.arm(start + 5_000)
        assert await armed.arm_and_abort(start + 1_000) == start + 5_000
        assert await armed.clear_and_abort() == start + 5_000
        await clock.advance(10_000)
        assert [call[0] for call in script.calls] == [start + 5_000]


class RawAlarmSql(DurableObject):
    """Moves its alarm with SQL on the runtime's own table instead of set_alarm."""

    async def arm(self, at_ms: int) -> None:
        await self.ctx.storage.set_alarm(at_ms)

    async def move_with_sql(self, at_ms: int) -> int | None:
        self.ctx.storage.sql.exec("UPDATE _DURABILITY_ALARM SET scheduled_ms = ?", at_ms)
        return await self.ctx.storage.get_alarm()

    async def alarm(self) -> None:
        self.env.SCRIPT.calls.append((now_ms(), 0, False, None))


async def test_sql_on_the_alarm_table_is_seen(
    make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """SQL that writes the runtime's alarm table directly is not lost behind the alarm
    row the runtime keeps in memory: get_alarm() reports it and the alarm fires then."""
    script = Script()
    async with make_runtime(bindings={"R": RawAlarmSql, "SCRIPT": script}) as rt:
        start = clock.now_ms()
        stub = rt.env.R.get_by_name("r")
        await stub.arm(start + 5_000)
        assert await stub.move_with_sql(start + 2_000) == start + 2_000
        await clock.advance(10_000)
        assert [call[0] for call in script.calls] == [start + 2_000]


class TriggerMaker(DurableObject):
    """Tries to write the alarm table from a trigger."""

    async def make(self) -> str:
        self.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS t (v INTEGER)")
        try:
            self.ctx.storage.sql.exec(
                "create temp trigger moves after insert on t begin "
                "update _durability_alarm set scheduled_ms = new.v; end"
            )
        except ValueError as error:
            return str(error)
        return "created"


async def test_a_trigger_on_the_alarm_table_is_refused(make_runtime: MakeRuntime) -> None:
    """Trigger writes to the alarm table would bypass the runtime: refused, named."""
    async with make_runtime(bindings={"T": TriggerMaker}) as rt:
        message = await rt.env.T.get_by_name("t").make()
        assert message.startswith("a trigger may not name _durability_alarm")
