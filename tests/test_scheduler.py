"""The scheduler engine: one alarm, reconcile, timers, permits, passes."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from types import SimpleNamespace
from typing import Any

import pytest

from _lab import Lab, open_lab
from _probe import Probe, sleeps
from conftest import START_MS, LiveObject, noop
from durability import (
    AlarmRetryInfo,
    Durability,
    DurabilityAlarms,
    DurabilityLog,
    DurabilityScheduler,
    DurableAlarmInfo,
    DurableCall,
    LogAppendInput,
    SerializedError,
    now_ms,
)
from durability._engine.options import SchedulerOptions
from durability._engine.participants import HostAlarmInfo, Participant
from durability._engine.permits import PermitPool
from durability._engine.reconcile import TimerTimes
from durability._engine.scheduler import attach
from durability._engine.tables import TableSpec
from durability._engine.timer import EarlyTimer
from durability.runtime import AlarmInvocationInfo, DurableObject
from durability.testing import VirtualClock


class SchedulerProbe(Probe):
    """The probe, with what the host breaks (`set_alarm`, the claims of some keys,
    `waitUntil`, alarm delivery, a pass failing at `failing_at`) and what it saw."""

    def __init__(self, **scheduler_options: Any) -> None:
        super().__init__()
        self.scheduler_options = scheduler_options
        self.alarm_names: tuple[str, ...] = ("slow", "quick", "renew")
        self.started: list[tuple[str, int]] = []
        self.platforms: list[HostAlarmInfo | None] = []
        self.failing_at: int | None = None
        self.failing_passes: list[HostAlarmInfo | None] = []
        self.break_set_alarm = False
        self.host_wait_until = True
        self.deliver_alarms = True
        self.retries: list[AlarmRetryInfo] = []
        self.broken_claims: set[str] = set()
        self.transactions = 0


class _Sql:
    """The object's SQL with the attempt claims of `probe.broken_claims` keys failing."""

    def __init__(self, sql: Any, probe: SchedulerProbe) -> None:
        self._sql = sql
        self._probe = probe

    def exec(self, query: str, *bindings: Any) -> Any:
        claim = "SET attempt = " in query
        if claim and not self._probe.broken_claims.isdisjoint(bindings):
            raise OSError("claim refused")
        return self._sql.exec(query, *bindings)


class _Storage:
    """The object's storage with a `set_alarm` and attempt claims the test can break."""

    def __init__(self, storage: Any, probe: SchedulerProbe) -> None:
        self._storage = storage
        self._probe = probe
        self.sql = _Sql(storage.sql, probe)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._storage, name)

    async def transaction(self, body: Any) -> Any:
        self._probe.transactions += 1
        return await self._storage.transaction(body)

    async def set_alarm(self, scheduled_time: int) -> None:
        if self._probe.break_set_alarm:
            raise OSError("alarm storage unavailable")
        await self._storage.set_alarm(scheduled_time)


class Sched(DurableObject):
    """An object with a shared scheduler, operations and named alarms."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        probe: SchedulerProbe = env["PROBE"]
        self.probe = probe
        context = SimpleNamespace(id=ctx.id, storage=_Storage(ctx.storage, probe))
        if probe.host_wait_until:
            context.wait_until = ctx.wait_until
        self.scheduler = DurabilityScheduler(
            context=context, on_alarm_retry=probe.retries.append, **probe.scheduler_options
        )
        self.durability = Durability(scheduler=self.scheduler, handlers={"work": self._work})
        self.alarms = DurabilityAlarms(
            scheduler=self.scheduler,
            handlers={name: self._alarm for name in probe.alarm_names},
        )
        if probe.failing_at is not None:
            engine = self.scheduler._engine
            engine.register(
                Participant(
                    TableSpec("failing", "id"),
                    run_due=self._failing_pass,
                    next_pending_at=lambda sql: probe.failing_at,
                )
            )

    async def _failing_pass(self, now: int, info: HostAlarmInfo | None) -> None:
        self.probe.failing_passes.append(info)
        raise RuntimeError("disk full")

    async def _work(self, call: DurableCall) -> None:
        label = f"op:{call.id}"
        self.probe.started.append((label, now_ms()))
        await self.probe.counted(label, self.probe.gate("work").wait())

    async def _alarm(self, info: DurableAlarmInfo) -> None:
        self.probe.platforms.append(info.platform)
        self.probe.started.append((info.name, now_ms()))
        behaviour = self.probe.behaviour.get(info.name, sleeps(0))
        await self.probe.counted(info.name, behaviour(info))

    async def register(self, id: str, delay_ms: int | None = None) -> None:
        await self.durability.work(id=id, delay_ms=delay_ms)

    async def schedule(self, name: str, at: int) -> None:
        await self.alarms.named(name)(at)

    async def arm(self) -> None:
        await self.scheduler._engine.schedule_next_alarm()

    async def alarm_at(self) -> int | None:
        return await self.ctx.storage.get_alarm()

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        if self.probe.deliver_alarms:
            await self.scheduler.alarm(info)


def lab(probe: SchedulerProbe) -> AbstractAsyncContextManager[Lab[SchedulerProbe]]:
    return open_lab("SCHED", Sched, probe)


def fake_context() -> Any:
    """A context of a new object that has storage but is never used (one per test)."""
    return SimpleNamespace(storage=SimpleNamespace(sql=None, on_delete_all=lambda hook: None))


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"alarm_concurrency": 0}, ValueError, "alarm_concurrency must be a positive integer"),
        ({"alarm_concurrency": "2"}, TypeError, "alarm_concurrency must be an integer"),
        ({"alarm_min_delay_ms": 999}, ValueError, "alarm_min_delay_ms must be between 1000 and"),
        ({"alarm_min_delay_ms": 15_001}, ValueError, "must be between 1000 and 15000"),
        ({"alarm_handoff_ms": 0}, ValueError, "alarm_handoff_ms must be a positive integer"),
        ({"live_timers": "yes"}, TypeError, "live_timers must be a bool"),
        ({"on_alarm_retry": 5}, TypeError, "on_alarm_retry must be callable"),
    ],
)
def test_scheduler_options_are_validated(
    options: dict[str, Any], error: type[Exception], message: str
) -> None:
    """Bad scheduler options raise at construction with the option's name."""
    with pytest.raises(error, match=message):
        DurabilityScheduler(context=fake_context(), **options)


def test_context_needs_storage() -> None:
    """A context without storage is rejected."""
    with pytest.raises(TypeError, match="context must have a storage"):
        DurabilityScheduler(context=SimpleNamespace())


def test_attach_needs_exactly_one_of_scheduler_and_context() -> None:
    """attach() takes a scheduler or a context (with options), never both or neither."""
    context = fake_context()
    scheduler = DurabilityScheduler(context=context)
    with pytest.raises(ValueError, match="either scheduler= or context=, not both"):
        attach(scheduler=scheduler, context=context, kind="k", options={})
    with pytest.raises(TypeError, match="either scheduler= or context= is required"):
        attach(scheduler=None, context=None, kind="k", options={})
    with pytest.raises(TypeError, match="unknown scheduler option storage_backend"):
        attach(scheduler=None, context=context, kind="k", options={"storage_backend": "kv"})
    with pytest.raises(TypeError, match="scheduler must be a DurabilityScheduler"):
        attach(scheduler=object(), context=None, kind="k", options={})  # type: ignore[arg-type]
    private = attach(
        scheduler=None,
        context=fake_context(),
        kind="k",
        options={"alarm_concurrency": 3},
    )
    assert private.options.alarm_concurrency == 3


def test_one_helper_per_kind_on_a_scheduler() -> None:
    """A kind can attach once per scheduler; other kinds share the same engine."""
    scheduler = DurabilityScheduler(context=fake_context())
    engine = attach(scheduler=scheduler, context=None, kind="Durability", options={})
    assert attach(scheduler=scheduler, context=None, kind="DurabilityLog", options={}) is engine
    with pytest.raises(ValueError, match="A Durability helper is already attached"):
        attach(scheduler=scheduler, context=None, kind="Durability", options={})


BETWEEN = "alarm_min_delay_ms must be between 1000 and 15000"


INVALID_OPTIONS: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"alarm_concurrency": 0}, ValueError, "alarm_concurrency must be a positive integer"),
    ({"alarm_concurrency": 1.5}, TypeError, "alarm_concurrency"),
    ({"alarm_concurrency": True}, TypeError, "alarm_concurrency"),
    ({"alarm_min_delay_ms": 999}, ValueError, BETWEEN),
    ({"alarm_min_delay_ms": 15_001}, ValueError, BETWEEN),
    ({"alarm_handoff_ms": 0}, ValueError, "alarm_handoff_ms must be a positive integer"),
    ({"live_timers": 1}, TypeError, "live_timers"),
    ({"on_alarm_retry": 1, "alarm_concurrency": 0}, TypeError, "on_alarm_retry"),
]


@pytest.mark.parametrize(
    ("options", "error", "message"),
    INVALID_OPTIONS,
    ids=[sorted(options)[-1] for options, _, _ in INVALID_OPTIONS],
)
async def test_invalid_option_raises_and_writes_nothing(
    live: LiveObject, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    """A bad option raises at construction with a message naming it, and writes nothing."""
    with pytest.raises(error, match=re.escape(message)):
        DurabilityScheduler(context=live.ctx, **options)
    assert live.tables() == []


async def test_scheduler_and_context_together_raise(live: LiveObject) -> None:
    """A helper takes `scheduler=` or `context=`, not both, and not neither."""
    scheduler = DurabilityScheduler(context=live.ctx)
    with pytest.raises(ValueError, match="scheduler"):
        Durability(context=live.ctx, scheduler=scheduler, handlers={"charge": noop})
    with pytest.raises(ValueError, match="alarm_concurrency"):
        Durability(scheduler=scheduler, handlers={"charge": noop}, alarm_concurrency=2)
    with pytest.raises(TypeError):
        Durability(handlers={"charge": noop})
    assert live.tables() == []


HELPERS: list[tuple[str, Callable[[DurabilityScheduler], object]]] = [
    ("Durability", lambda s: Durability(scheduler=s, handlers={"charge": noop})),
    ("DurabilityAlarms", lambda s: DurabilityAlarms(scheduler=s, handlers={"renew": noop})),
    ("DurabilityLog", lambda s: DurabilityLog(scheduler=s)),
]


@pytest.mark.parametrize("build", [h[1] for h in HELPERS], ids=[h[0] for h in HELPERS])
async def test_second_helper_of_a_kind_raises(
    live: LiveObject, build: Callable[[DurabilityScheduler], object]
) -> None:
    """A second helper of the same kind on one scheduler raises `ValueError`."""
    scheduler = DurabilityScheduler(context=live.ctx)
    build(scheduler)
    with pytest.raises(ValueError, match="already attached"):
        build(scheduler)


async def test_rejected_helper_leaves_the_scheduler_free(live: LiveObject) -> None:
    """A helper rejected at construction does not claim its kind on the shared scheduler."""
    scheduler = DurabilityScheduler(context=live.ctx)
    with pytest.raises(TypeError):
        Durability(scheduler=scheduler, handlers={"charge": noop}, on_lifecycle_event=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        DurabilityAlarms(scheduler=scheduler, handlers={"renew": noop}, attempt_timeout_ms=0)
    assert live.tables() == []
    Durability(scheduler=scheduler, handlers={"charge": noop})
    DurabilityAlarms(scheduler=scheduler, handlers={"renew": noop})


async def test_a_log_given_context_takes_scheduler_options_as_every_helper(
    live: LiveObject,
) -> None:
    """`DurabilityLog(context=, <scheduler option>=)`: the first helper builds the object's
    scheduler with them; a later helper whose option differs raises `ValueError`; with
    `scheduler=` an option is refused, and an unknown value is reported by name."""
    with pytest.raises(ValueError, match="alarm_min_delay_ms"):
        DurabilityLog(context=live.ctx, alarm_min_delay_ms=50)
    log: DurabilityLog[Any] = DurabilityLog(context=live.ctx, alarm_concurrency=3, live_timers=True)
    scheduler = DurabilityScheduler.of(live.ctx)
    assert scheduler is not None
    assert scheduler._engine.options.alarm_concurrency == 3
    assert scheduler._engine.options.live_timers is True
    with pytest.raises(ValueError, match="alarm_concurrency differs"):
        Durability(context=live.ctx, handlers={"charge": noop}, alarm_concurrency=4)
    Durability(context=live.ctx, handlers={"charge": noop}, alarm_concurrency=3)
    with pytest.raises(ValueError, match="alarm_concurrency"):
        DurabilityLog(scheduler=scheduler, alarm_concurrency=3)
    assert (await log.append([LogAppendInput(body="a")])).value == [0]


async def test_helpers_of_different_kinds_share_a_scheduler(live: LiveObject) -> None:
    """One helper of each kind attaches to one shared scheduler."""
    scheduler = DurabilityScheduler(context=live.ctx)
    for _, build in HELPERS:
        build(scheduler)
    tables = set(live.tables())
    assert {"durability_alarms", "durability_calls", "durability_migrations"} <= tables
    assert any(name.startswith("durability_log") for name in tables)


async def test_alarm_target_is_the_later_of_earliest_and_min_delay() -> None:
    """The alarm is max(earliest pending, now + alarm_min_delay_ms)."""
    probe = SchedulerProbe(alarm_min_delay_ms=5_000)
    async with lab(probe) as t:
        await t.obj.schedule("renew", START_MS + 1_000)
        assert await t.obj.alarm_at() == START_MS + 5_000
        await t.obj.schedule("renew", START_MS + 60_000)
        assert await t.obj.alarm_at() == START_MS + 60_000


async def test_alarm_inside_the_window_is_left_alone() -> None:
    """An alarm in [earliest, target] is not pushed later; one before earliest is moved."""
    probe = SchedulerProbe()
    async with lab(probe) as t:
        await t.obj.schedule("slow", START_MS + 60_000)
        await t.clock.advance(50_000)
        await t.obj.schedule("quick", START_MS + 100_000)
        assert await t.obj.alarm_at() == START_MS + 60_000
        await t.obj.schedule("slow", START_MS + 200_000)
        assert await t.obj.alarm_at() == START_MS + 100_000


async def test_no_pending_work_deletes_the_alarm() -> None:
    """When the last pending row is gone, reconciliation deletes the alarm."""
    probe = SchedulerProbe()
    async with lab(probe) as t:
        await t.obj.schedule("renew", START_MS + 60_000)
        assert await t.obj.alarm_at() == START_MS + 60_000
        await t.clock.advance(60_000)
        assert len(probe.started) == 1
        assert await t.obj.alarm_at() is None


@pytest.mark.parametrize(
    ("live_timers", "quick_at"), [(True, START_MS + 40_000), (False, START_MS + 200_000)]
)
async def test_live_timers_run_due_work_beside_a_long_handler(
    live_timers: bool, quick_at: int
) -> None:
    """With live timers a pass skips running keys, so work due later starts on time."""
    probe = SchedulerProbe(live_timers=live_timers)
    probe.behaviour["slow"] = sleeps(200_000)
    async with lab(probe) as t:
        await t.obj.schedule("slow", START_MS)
        await t.obj.schedule("quick", START_MS + 40_000)
        await t.clock.advance(300_000)
        assert probe.started == [("slow", START_MS), ("quick", quick_at)]


@pytest.mark.parametrize("live_timers", [False, True])
async def test_near_work_starts_on_time_beside_a_long_handler(live_timers: bool) -> None:
    """Work due within the min delay gets the timer even while an earlier row is still
    running: the timer skips running keys in both modes."""
    probe = SchedulerProbe(live_timers=live_timers)
    probe.behaviour["slow"] = sleeps(200_000)
    async with lab(probe) as t:
        await t.obj.schedule("slow", START_MS)
        await t.clock.advance(1_000)
        await t.obj.schedule("quick", START_MS + 6_000)
        await t.clock.advance(300_000)
        assert probe.started == [("slow", START_MS), ("quick", START_MS + 6_000)]


@pytest.mark.parametrize(
    ("live_timers", "due_in_ms", "runs"),
    [(False, 3_000, True), (False, 60_000, False), (True, 60_000, True)],
)
async def test_timer_serves_near_work_and_with_live_timers_all_work(
    live_timers: bool, due_in_ms: int, runs: bool
) -> None:
    """With the object's alarm ignored, only the in-memory timer can start work."""
    probe = SchedulerProbe(live_timers=live_timers)
    probe.deliver_alarms = False
    async with lab(probe) as t:
        await t.obj.schedule("renew", START_MS + due_in_ms)
        await t.clock.advance(120_000)
        assert probe.started == ([("renew", START_MS + due_in_ms)] if runs else [])


async def test_permits_are_fifo_and_eager_start_needs_a_free_permit() -> None:
    """With 2 permits, registrations beyond 2 (and due alarms) wait for a permit."""
    probe = SchedulerProbe(alarm_concurrency=2)
    async with lab(probe) as t:
        for id in "abcde":
            await t.obj.register(id)
        await t.clock.run_until_idle()
        assert [label for label, _ in probe.started] == ["op:a", "op:b"]
        await t.obj.schedule("renew", START_MS)
        await t.clock.advance(1_000)
        assert sum(probe.running.values()) == 2 and len(probe.started) == 2
        probe.gate("work").set()
        await t.clock.run_until_idle()
        labels = [label for label, _ in probe.started]
        assert labels[:2] == ["op:a", "op:b"]
        assert sorted(labels[2:]) == ["op:c", "op:d", "op:e", "renew"]
        assert probe.max_running == 2


async def test_permit_pool_is_fifo_and_releases_are_idempotent() -> None:
    """Waiters get permits in arrival order; a second release is a no-op."""
    pool = PermitPool(1)
    first = pool.try_acquire()
    assert first is not None
    assert pool.try_acquire() is None
    order: list[str] = []

    async def take(name: str) -> None:
        release = await pool.acquire()
        order.append(name)
        release()
        release()

    cancelled = asyncio.ensure_future(take("cancelled"))
    waiters = [asyncio.ensure_future(take(name)) for name in ("w1", "w2", "w3")]
    await asyncio.sleep(0)
    cancelled.cancel()
    await asyncio.sleep(0)
    first()
    first()
    await asyncio.gather(*waiters)
    assert order == ["w1", "w2", "w3"]
    again = pool.try_acquire()
    assert again is not None
    assert pool.try_acquire() is None


async def test_a_pass_takes_100_due_rows_per_helper() -> None:
    """150 due alarms: the physical alarm's pass runs 100, the timer's pass the other 50."""
    probe = SchedulerProbe(alarm_concurrency=200)
    probe.alarm_names = tuple(f"n{index}" for index in range(150))
    async with lab(probe) as t:
        for name in probe.alarm_names:
            await t.obj.schedule(name, START_MS + 60_000)
        await t.clock.advance(60_000)
        assert len(probe.platforms) == 150
        assert sum(platform is not None for platform in probe.platforms) == 100
        assert all(platform is None for platform in probe.platforms[100:])


async def test_long_pass_hands_off_and_the_next_pass_attaches() -> None:
    """After alarm_handoff_ms the pass re-arms and returns; later passes attach, not rerun."""
    probe = SchedulerProbe(alarm_handoff_ms=60_000)
    probe.behaviour["slow"] = sleeps(200_000)
    async with lab(probe) as t:
        await t.obj.schedule("slow", START_MS + 20_000)
        await t.clock.advance(20_000 + 60_000 + 1)
        assert await t.obj.alarm_at() == START_MS + 95_000
        await t.clock.advance(200_000)
        assert probe.started == [("slow", START_MS + 20_000)]
        assert await t.obj.alarm_at() is None


async def test_failing_pass_arms_its_own_retry_and_returns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A raising pass sets the alarm at now + min delay, logs, calls on_alarm_retry."""
    probe = SchedulerProbe()
    probe.failing_at = START_MS + 20_000
    async with lab(probe) as t:
        with caplog.at_level(logging.ERROR, logger="durability"):
            await t.obj.arm()
            assert await t.obj.alarm_at() == START_MS + 20_000
            await t.clock.advance(20_000)
            assert await t.obj.alarm_at() == START_MS + 35_000
            await t.clock.advance(15_000 * 9)
        assert len(probe.failing_passes) == 10
        assert all(info is not None and not info.is_retry for info in probe.failing_passes)
        assert len(probe.retries) == 10
        retry = probe.retries[0]
        assert retry.error == SerializedError("RuntimeError", "disk full")
        assert (retry.retry_in_ms, retry.retry_count, retry.is_retry) == (15_000, 0, False)
        assert retry.object_id == str(t.obj.id)
        failures = [
            r for r in caplog.records if getattr(r, "event", "") == "durability.alarm.failed"
        ]
        assert len(failures) == 10
        assert failures[0].details == {"retry_in_ms": 15_000}  # type: ignore[attr-defined]


async def test_a_storage_failure_on_one_operation_fails_the_pass_after_the_others() -> None:
    """A failing claim fails the pass (fallback, on_alarm_retry) once the other rows ran."""
    probe = SchedulerProbe()
    probe.gate("work").set()
    probe.broken_claims = {"a", "b", "c"}
    async with lab(probe) as t:
        for id in "abc":
            await t.obj.register(id, 1)
        await t.clock.advance(1)
        await t.clock.run_until_idle()
        assert probe.started == []
        failed_passes = len(probe.retries)
        assert failed_passes > 0
        probe.broken_claims = {"b"}
        await t.clock.advance(15_000)
        assert sorted(label for label, _ in probe.started) == ["op:a", "op:c"]
        assert [retry.error for retry in probe.retries] == (failed_passes + 1) * [
            SerializedError("OSError", "claim refused")
        ]
        assert await t.obj.alarm_at() == START_MS + 30_001
        probe.broken_claims = set()
        await t.clock.advance(15_000)
        assert sorted(label for label, _ in probe.started) == ["op:a", "op:b", "op:c"]


async def test_a_storage_failure_on_one_alarm_fails_the_pass_after_the_others() -> None:
    """Named alarms keep the same pass rule: the other names run, the failed one later."""
    probe = SchedulerProbe()
    probe.broken_claims = {"quick"}
    async with lab(probe) as t:
        for name in probe.alarm_names:
            await t.obj.schedule(name, START_MS + 20_000)
        await t.clock.advance(20_000)
        assert sorted(label for label, _ in probe.started) == ["renew", "slow"]
        assert len(probe.retries) == 1
        assert await t.obj.alarm_at() == START_MS + 35_000
        probe.broken_claims = set()
        await t.clock.advance(15_000)
        assert sorted(label for label, _ in probe.started) == ["quick", "renew", "slow"]


async def test_failed_fallback_reaches_the_hosts_retries() -> None:
    """When even the fallback set_alarm fails, the error propagates and the host retries."""
    probe = SchedulerProbe()
    probe.failing_at = START_MS + 20_000
    async with lab(probe) as t:
        await t.obj.arm()
        probe.break_set_alarm = True
        await t.clock.advance(20_000 + 2_000 + 4_000)
        infos = probe.failing_passes
        assert [(info.retry_count, info.is_retry) for info in infos] == [  # type: ignore[union-attr]
            (0, False),
            (1, True),
            (2, True),
        ]
        assert probe.retries == []


async def _broken_async(info: AlarmRetryInfo) -> None:
    await asyncio.sleep(0)
    raise RuntimeError("pager down")


def _broken_sync(info: AlarmRetryInfo) -> None:
    raise RuntimeError("pager down")


@pytest.mark.parametrize("broken", [_broken_sync, _broken_async])
async def test_retry_hook_failure_is_only_logged(
    broken: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """on_alarm_retry raising (sync or async) is only logged; scheduling is unchanged."""
    probe = SchedulerProbe()
    probe.failing_at = START_MS + 20_000
    probe.retries = _Raising(broken)
    async with lab(probe) as t:
        with caplog.at_level(logging.ERROR, logger="durability"):
            await t.obj.arm()
            await t.clock.advance(20_000)
        assert await t.obj.alarm_at() == START_MS + 35_000
    events = [getattr(r, "event", "") for r in caplog.records]
    assert events.count("durability.alarm.retry_hook_failed") == 1


class _Raising(list[Any]):
    def __init__(self, hook: Any) -> None:
        super().__init__()
        self._hook = hook

    def append(self, item: Any) -> Any:
        return self._hook(item)


async def test_engine_runs_without_a_host_wait_until() -> None:
    """A context without wait_until still runs eager work and timer passes."""
    probe = SchedulerProbe(alarm_concurrency=1)
    probe.host_wait_until = False
    async with lab(probe) as t:
        await t.obj.register("a")
        await t.obj.register("b")
        await t.clock.run_until_idle()
        assert [label for label, _ in probe.started] == ["op:a"]
        probe.gate("work").set()
        await t.clock.run_until_idle()
        assert [label for label, _ in probe.started] == ["op:a", "op:b"]


@pytest.mark.parametrize("live_timers", [False, True])
async def test_operations_starved_of_permits_leave_the_loop_idle(live_timers: bool) -> None:
    """Operations waiting for the one permit cost no transactions until it frees."""
    probe = SchedulerProbe(alarm_concurrency=1, live_timers=live_timers)
    async with lab(probe) as t:
        for id in "abc":
            await t.obj.register(id)
        await t.clock.run_until_idle()
        settled = probe.transactions
        await t.obj.schedule("quick", START_MS + 1_000)
        await t.clock.advance(100_000)
        assert probe.transactions - settled <= 3
        assert [label for label, _ in probe.started] == ["op:a"]
        probe.gate("work").set()
        await t.clock.run_until_idle()
        labels = [label for label, _ in probe.started]
        assert labels[:2] == ["op:a", "op:b"]
        assert sorted(labels[2:]) == ["op:c", "quick"]
        assert probe.max_running == 1


@pytest.mark.parametrize("live_timers", [False, True])
async def test_named_alarms_starved_of_permits_leave_the_loop_idle(live_timers: bool) -> None:
    """Named alarms waiting for the one permit cost no transactions until it frees."""
    probe = SchedulerProbe(alarm_concurrency=1, live_timers=live_timers)
    probe.alarm_names = ("slow", "quick", "renew", "later")
    probe.behaviour["slow"] = sleeps(200_000)
    probe.gate("work").set()
    async with lab(probe) as t:
        await t.obj.schedule("slow", START_MS)
        await t.obj.schedule("quick", START_MS + 1_000)
        await t.obj.schedule("renew", START_MS + 1_000)
        await t.clock.advance(1_000)
        settled = probe.transactions
        await t.obj.schedule("later", START_MS + 300_000)
        await t.obj.register("a")
        await t.clock.advance(100_000)
        assert probe.transactions - settled <= 4
        assert probe.started == [("slow", START_MS)]
        await t.clock.advance(200_000)
        labels = [label for label, _ in probe.started]
        assert labels == ["slow", "quick", "op:a", "renew", "later"]
        assert probe.max_running == 1


@pytest.mark.parametrize("live_timers", [False, True])
async def test_work_behind_a_starved_pass_starts_at_its_exact_time(live_timers: bool) -> None:
    """Near-term work scheduled while a pass waits for permits starts on time once they free."""
    probe = SchedulerProbe(alarm_concurrency=1, live_timers=live_timers)
    probe.alarm_names = ("quick", "renew", "later")
    probe.deliver_alarms = False
    async with lab(probe) as t:
        await t.obj.register("a")
        await t.obj.schedule("quick", START_MS + 1_000)
        await t.obj.schedule("renew", START_MS + 1_000)
        await t.clock.advance(1_000)
        await t.obj.schedule("later", START_MS + 5_000)
        await t.clock.advance(1_000)
        assert [label for label, _ in probe.started] == ["op:a"]
        probe.gate("work").set()
        await t.clock.advance(10_000)
        assert probe.started == [
            ("op:a", START_MS),
            ("quick", START_MS + 2_000),
            ("renew", START_MS + 2_000),
            ("later", START_MS + 5_000),
        ]


async def test_a_deferred_table_is_owed_a_pass_until_its_rows_are_taken(
    clock: VirtualClock,
) -> None:
    """A table whose pass is taking rows gets no timer: one pass once taken, else a timer."""
    passes: list[tuple[int, list[str]]] = []

    def start_pass(at: int, wanted: Callable[[str], bool]) -> None:
        passes.append((at, [table for table in ("ops", "alarms") if wanted(table)]))

    async with clock:
        timer = EarlyTimer(SchedulerOptions(), start_pass)
        taken = timer.pulling("ops")
        timer.schedule(TimerTimes(None, {"ops": START_MS}))
        await clock.advance(1_000)
        assert passes == []
        taken()
        taken()
        assert passes == [(START_MS + 1_000, ["ops"])]
        timer.schedule(TimerTimes(None, {"alarms": START_MS + 3_000}))
        await clock.advance(5_000)
        assert passes[1:] == [(START_MS + 3_000, ["ops", "alarms"])]
        taken = timer.pulling("ops")
        timer.schedule(TimerTimes(None, {"ops": START_MS + 60_000}))
        taken()
        await clock.advance(60_000)
        assert passes[2:] == []
