"""VirtualClock: loop timers follow virtual time, and only advance moves it."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

import durability
from conftest import START_MS, LiveObject, MakeRuntime
from durability import _virtual_loop
from durability.runtime import AlarmInvocationInfo, DurableObject, Runtime
from durability.testing import VirtualClock

DAY_MS = 86_400_000


async def test_now_ms_starts_at_start_ms() -> None:
    """now_ms() is start_ms until time is advanced, default and custom."""
    assert VirtualClock().now_ms() == START_MS
    clock = VirtualClock(start_ms=5_000)
    assert clock.now_ms() == 5_000
    async with clock:
        assert durability.now_ms() == 5_000
        await clock.advance(250)
        assert durability.now_ms() == 5_250
        assert clock.now_ms() == 5_250


async def test_bad_arguments_are_rejected() -> None:
    """Bad start_ms or advance arguments raise TypeError/ValueError naming the field."""
    with pytest.raises(TypeError, match="start_ms"):
        VirtualClock(start_ms=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="start_ms"):
        VirtualClock(start_ms=-1)
    clock = VirtualClock()
    async with clock:
        with pytest.raises(ValueError, match="ms"):
            await clock.advance(-1)
        with pytest.raises(TypeError, match="ms"):
            await clock.advance(True)
        with pytest.raises(ValueError, match="past"):
            await clock.advance_to(START_MS - 1)
        assert clock.now_ms() == START_MS


async def test_sleep_follows_virtual_time() -> None:
    """A task sleeping 10 s wakes exactly when the clock reaches +10 s."""
    async with VirtualClock() as clock:
        woke_at: list[int] = []

        async def sleeper() -> None:
            await asyncio.sleep(10)
            woke_at.append(durability.now_ms())

        task = asyncio.create_task(sleeper())
        await clock.advance(9_999)
        assert woke_at == []
        assert not task.done()
        await clock.advance(1)
        assert woke_at == [START_MS + 10_000]
        assert task.done()


async def test_timeout_and_wait_for_follow_virtual_time() -> None:
    """asyncio.timeout and wait_for expire at the virtual deadline, not before."""
    async with VirtualClock() as clock:
        never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        outcomes: list[tuple[str, int]] = []

        async def with_timeout() -> None:
            try:
                async with asyncio.timeout(5):
                    await asyncio.shield(never)
            except TimeoutError:
                outcomes.append(("timeout", durability.now_ms()))

        async def with_wait_for() -> None:
            try:
                await asyncio.wait_for(asyncio.shield(never), 7)
            except TimeoutError:
                outcomes.append(("wait_for", durability.now_ms()))

        tasks = [asyncio.create_task(with_timeout()), asyncio.create_task(with_wait_for())]
        await clock.advance(4_999)
        assert outcomes == []
        await clock.advance(10_000)
        assert outcomes == [("timeout", START_MS + 5_000), ("wait_for", START_MS + 7_000)]
        await asyncio.gather(*tasks)


async def test_advance_fires_call_later_and_call_at_in_time_order() -> None:
    """Timers scheduled out of order fire in time order, each seeing its own time."""
    async with VirtualClock() as clock:
        loop = asyncio.get_running_loop()
        fired: list[tuple[str, int]] = []

        def record(name: str) -> None:
            fired.append((name, durability.now_ms()))

        loop.call_later(30, record, "c")
        loop.call_later(10, record, "a")
        loop.call_at(loop.time() + 20, record, "b")
        loop.call_later(60, record, "late")
        await clock.advance(30_000)
        assert fired == [
            ("a", START_MS + 10_000),
            ("b", START_MS + 20_000),
            ("c", START_MS + 30_000),
        ]
        assert clock.now_ms() == START_MS + 30_000


async def test_timers_due_at_one_instant_all_fire_there() -> None:
    """Several timers due at the same instant all run, with time at that instant."""
    async with VirtualClock() as clock:
        loop = asyncio.get_running_loop()
        seen: list[int] = []
        for _ in range(5):
            loop.call_later(3, lambda: seen.append(durability.now_ms()))
        await clock.advance(60_000)
        assert seen == [START_MS + 3_000] * 5


async def test_cancelled_timers_do_not_fire() -> None:
    """A cancelled timer is skipped and time still reaches the target."""
    async with VirtualClock() as clock:
        loop = asyncio.get_running_loop()
        fired: list[str] = []
        handle = loop.call_later(1, fired.append, "cancelled")
        loop.call_later(2, fired.append, "kept")
        handle.cancel()
        await clock.advance(5_000)
        assert fired == ["kept"]
        assert clock.now_ms() == START_MS + 5_000


async def test_work_started_by_a_timer_runs_until_it_waits_on_time() -> None:
    """Chains of tasks and futures started by a timer finish inside the advance."""
    async with VirtualClock() as clock:
        loop = asyncio.get_running_loop()
        log: list[tuple[str, int]] = []
        gate: asyncio.Future[str] = loop.create_future()

        async def producer() -> None:
            await asyncio.sleep(1)
            for _ in range(20):
                await asyncio.sleep(0)
            gate.set_result("open")

        async def consumer() -> None:
            value = await gate
            inner = asyncio.create_task(asyncio.sleep(0, result=value))
            log.append((await inner, durability.now_ms()))
            await asyncio.sleep(2)
            log.append(("again", durability.now_ms()))

        tasks = [asyncio.create_task(producer()), asyncio.create_task(consumer())]
        await clock.advance(1_000)
        assert log == [("open", START_MS + 1_000)]
        await clock.advance(5_000)
        assert log == [("open", START_MS + 1_000), ("again", START_MS + 3_000)]
        await asyncio.gather(*tasks)


async def test_run_until_idle_runs_ready_work_without_moving_time() -> None:
    """run_until_idle finishes ready work and due-now timers; timers later stay pending."""
    async with VirtualClock() as clock:
        loop = asyncio.get_running_loop()
        done: list[str] = []

        async def chain(depth: int) -> None:
            if depth:
                await asyncio.create_task(chain(depth - 1))
            else:
                done.append("bottom")

        loop.call_later(0, done.append, "due-now")
        loop.call_later(1, done.append, "later")
        task = asyncio.create_task(chain(50))
        await clock.run_until_idle()
        assert task.done()
        assert sorted(done) == ["bottom", "due-now"]
        assert clock.now_ms() == START_MS


async def test_settling_waits_for_executor_work() -> None:
    """Work handed to a thread via run_in_executor/to_thread is awaited by the settle."""
    async with VirtualClock() as clock:
        results: list[int] = []

        async def worker() -> None:
            await asyncio.sleep(1)
            results.append(await asyncio.to_thread(sum, range(10_000)))

        task = asyncio.create_task(worker())
        await clock.advance(1_000)
        assert results == [sum(range(10_000))]
        assert task.done()


async def test_thirty_days_of_minute_sleeps() -> None:
    """30 virtual days of a task sleeping one minute wake it once per minute, in order."""
    async with VirtualClock() as clock:
        wakeups: list[int] = []

        async def ticker() -> None:
            while True:
                await asyncio.sleep(60)
                wakeups.append(durability.now_ms())

        task = asyncio.create_task(ticker())
        await clock.advance(30 * DAY_MS)
        task.cancel()
        assert len(wakeups) == 30 * 24 * 60
        assert wakeups[0] == START_MS + 60_000
        assert wakeups[-1] == START_MS + 30 * DAY_MS
        assert all(b - a == 60_000 for a, b in itertools.pairwise(wakeups))


async def test_busy_loop_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    """A task that keeps rescheduling itself makes advance raise instead of spinning."""
    monkeypatch.setattr(_virtual_loop, "MAX_SETTLE_ROUNDS", 500)
    async with VirtualClock() as clock:

        async def spinner() -> None:
            while True:
                await asyncio.sleep(0)

        task = asyncio.create_task(spinner())
        with pytest.raises(RuntimeError, match="still busy after 500 iterations"):
            await clock.run_until_idle()
        task.cancel()


async def test_detach_restores_real_time_and_carries_timers_over() -> None:
    """After detach, loop.time and now_ms are real; pending timers keep their delay."""
    loop = asyncio.get_running_loop()
    fired: list[str] = []
    before = loop.call_later(3_600, fired.append, "before-attach")
    clock = VirtualClock(start_ms=0)
    clock.attach()
    assert loop.time() == 0
    assert durability.now_ms() == 0
    assert before.when() == pytest.approx(3_600, abs=1)
    during = loop.call_later(7_200, fired.append, "during")
    await clock.advance(3_600_000 + 1_000)
    assert fired == ["before-attach"]
    clock.detach()
    assert abs(loop.time() - time.monotonic()) < 5
    assert abs(durability.now_ms() - time.time() * 1000) < 5_000
    assert during.when() - loop.time() == pytest.approx(3_599, abs=1)
    during.cancel()


async def test_attach_nests_and_refuses_a_second_loop() -> None:
    """attach twice needs two detaches; another loop or a stray detach raise."""
    loop = asyncio.get_running_loop()
    clock = VirtualClock()
    clock.attach(loop)
    clock.attach(loop)
    other = asyncio.new_event_loop()
    try:
        with pytest.raises(RuntimeError, match="another event loop"):
            clock.attach(other)
        with pytest.raises(RuntimeError, match="not attached"):
            clock.detach(other)
    finally:
        other.close()
    clock.detach(loop)
    assert durability.now_ms() == START_MS
    clock.detach(loop)
    assert durability.now_ms() != START_MS
    with pytest.raises(RuntimeError, match="not attached"):
        clock.detach(loop)


async def test_advance_while_detached_only_moves_time() -> None:
    """A detached clock can be set forward; the loop keeps real time meanwhile."""
    clock = VirtualClock()
    await clock.advance(DAY_MS)
    await clock.run_until_idle()
    assert clock.now_ms() == START_MS + DAY_MS
    assert durability.now_ms() != START_MS + DAY_MS


async def test_one_advance_at_a_time() -> None:
    """Starting a second advance while one runs raises instead of interleaving."""
    async with VirtualClock() as clock:
        errors: list[BaseException] = []

        async def nested() -> None:
            try:
                await clock.advance(1)
            except RuntimeError as exc:
                errors.append(exc)

        asyncio.get_running_loop().call_later(1, lambda: asyncio.create_task(nested()))
        await clock.advance(10_000)
        assert len(errors) == 1
        assert "already advancing" in str(errors[0])


async def test_timer_for_a_millisecond_fires_at_that_millisecond() -> None:
    """A delay computed from ms (as the runtime does for alarms) fires at exactly that ms."""
    async with VirtualClock() as clock:
        loop = asyncio.get_running_loop()
        for offset in (1, 7, 333, 1_234, 59_999, 86_400_001):
            due_ms = clock.now_ms() + offset
            fired: list[int] = []
            delay = (due_ms - clock.now_ms()) / 1000
            loop.call_later(delay, _append_now, fired, clock)
            await clock.advance_to(due_ms - 1)
            assert fired == []
            await clock.advance_to(due_ms)
            assert fired == [due_ms]


def _append_now(out: list[int], clock: VirtualClock) -> None:
    out.append(clock.now_ms())


async def test_detach_during_advance_ends_it() -> None:
    """A detach from work run by an advance ends that advance at its target time."""
    loop = asyncio.get_running_loop()
    clock = VirtualClock()
    clock.attach(loop)
    loop.call_later(1, clock.detach, loop)
    await clock.advance(DAY_MS)
    assert clock.now_ms() == START_MS + DAY_MS
    assert durability.now_ms() != START_MS + DAY_MS


class _HourlyTicker(DurableObject):
    """Re-arms its alarm every hour and records when each one fired."""

    async def start(self) -> None:
        self.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS fired (at_ms INTEGER)")
        await self.ctx.storage.set_alarm(durability.now_ms() + 3_600_000)

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        self.ctx.storage.sql.exec("INSERT INTO fired (at_ms) VALUES (?)", durability.now_ms())
        await self.ctx.storage.set_alarm(durability.now_ms() + 3_600_000)

    async def fired(self) -> list[int]:
        rows = self.ctx.storage.sql.exec("SELECT at_ms FROM fired ORDER BY at_ms")
        return [row["at_ms"] for row in rows]


async def test_thirty_days_of_runtime_alarms(
    make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """Through a Runtime, 30 days of hourly alarms each fire once, exactly on time."""
    async with make_runtime(bindings={"TICKERS": _HourlyTicker}) as runtime:
        ticker = runtime.env.TICKERS.get_by_name("t")
        await ticker.start()
        await clock.advance(30 * DAY_MS)
        fired = await ticker.fired()
    assert fired == [START_MS + hour * 3_600_000 for hour in range(1, 30 * 24 + 1)]


async def test_a_runtime_inside_an_attached_clock_leaves_it_bound() -> None:
    """Closing a Runtime that shares an attached clock keeps now_ms() on virtual time."""
    async with VirtualClock() as clock:
        async with Runtime(clock=clock):
            await clock.advance(1_000)
        assert durability.now_ms() == START_MS + 1_000
        await clock.advance(1_000)
        assert durability.now_ms() == START_MS + 2_000
    assert abs(durability.now_ms() - time.time() * 1000) < 60_000


async def test_times_may_be_aware_datetimes() -> None:
    """start_ms and advance_to take aware datetimes too; naive ones are refused."""
    from datetime import UTC, datetime, timedelta

    start = datetime(2030, 1, 1, tzinfo=UTC)
    clock = VirtualClock(start_ms=start)
    assert clock.now_ms() == int(start.timestamp() * 1000)
    async with clock:
        await clock.advance_to(start + timedelta(seconds=5))
        assert durability.now_ms() == int(start.timestamp() * 1000) + 5_000
    with pytest.raises(ValueError, match="aware"):
        VirtualClock(start_ms=datetime(2030, 1, 1))


async def test_now_ms_follows_the_virtual_clock_inside_a_runtime(live: LiveObject) -> None:
    """`durability.now_ms()` reads the runtime's virtual clock, moved only by advance."""
    assert await live.stub.now() == START_MS
    assert durability.now_ms() == START_MS
    await live.clock.advance(1_234)
    assert await live.stub.now() == START_MS + 1_234
    await live.clock.advance_to(START_MS + 10_000)
    assert durability.now_ms() == live.clock.now_ms() == START_MS + 10_000


async def test_now_ms_reads_the_clock_of_each_loop_in_turn() -> None:
    """Loops with different clocks never read each other's time, whichever asked last."""

    async def read() -> int:
        return durability.now_ms()

    async with VirtualClock() as clock:
        assert durability.now_ms() == START_MS
        wall = await asyncio.to_thread(asyncio.run, read())
        assert abs(wall - time.time() * 1000) < 60_000
        assert durability.now_ms() == START_MS
        await clock.advance(3)
        assert durability.now_ms() == START_MS + 3
        wall = await asyncio.to_thread(asyncio.run, read())
        assert abs(wall - time.time() * 1000) < 60_000
        assert durability.now_ms() == START_MS + 3
    assert abs(durability.now_ms() - time.time() * 1000) < 60_000
    async with VirtualClock(start_ms=9_000):
        assert durability.now_ms() == 9_000


async def test_a_wall_clock_runtime_beside_a_virtual_loop_reads_wall_time() -> None:
    """A runtime on the wall clock and a virtual clock on another loop, open at once: each
    loop reads its own time, before, during and after the other attaches."""

    async def virtual() -> list[int]:
        async with VirtualClock(start_ms=9_000) as clock:
            await clock.advance(5)
            return [durability.now_ms()]

    def near_wall(ms: int) -> bool:
        return abs(ms - time.time() * 1000) < 60_000

    async with Runtime():
        assert near_wall(durability.now_ms())
        assert await asyncio.to_thread(asyncio.run, virtual()) == [9_005]
        assert near_wall(durability.now_ms())
        async with VirtualClock(start_ms=7_000):
            assert durability.now_ms() == 7_000
        assert near_wall(durability.now_ms())


async def test_a_timer_due_a_hair_after_now_moves_time_to_it() -> None:
    """A timer whose float time is within the clock's resolution of now, but later, still
    fires, and the loop's time has reached it when it does: code that re-arms itself until
    `loop.time()` passes its deadline (as idle eviction does) ends instead of spinning."""
    async with VirtualClock() as clock:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 4e-7  # two float steps after now at epoch magnitudes
        fired: list[float] = []

        def check() -> None:
            remaining = deadline - loop.time()
            if remaining > 0:
                loop.call_later(remaining, check)
            else:
                fired.append(loop.time())

        loop.call_later(deadline - loop.time(), check)
        await clock.advance(1_000)
        assert fired and fired[0] >= deadline
