"""One scheduler per object: helpers given the same `context=` share it."""

from __future__ import annotations

import gc
from types import SimpleNamespace
from typing import Any

import pytest

from _lab import open_lab
from conftest import LiveObject, noop
from durability import (
    Durability,
    DurabilityAlarms,
    DurabilityLog,
    DurabilityScheduler,
    DurableAlarmInfo,
    now_ms,
)
from durability.cloudflare import adapt
from durability.runtime import AlarmInvocationInfo, DurableObject

on_hosts = pytest.mark.usefixtures("host")
"""On the embedded runtime and on both Cloudflare doubles."""

HOUR_MS = 60 * 60 * 1000


class TwoPrivateHelpers(DurableObject):
    """The natural mistake: two helpers each given `context=`, `alarm()` sent to one."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.probe: list[int] = env["PROBE"]
        self.durability = Durability(context=ctx, handlers={"work": noop})
        self.alarms = DurabilityAlarms(context=ctx, handlers={"renew": self._renew})

    async def _renew(self, info: DurableAlarmInfo) -> None:
        self.probe.append(now_ms())

    async def renew_at(self, at: int) -> None:
        await self.alarms.renew(at)

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.durability.alarm(info)


@on_hosts
async def test_two_helpers_given_context_share_the_alarm() -> None:
    """A named alarm fires although alarm() goes to the operations helper only."""
    fired: list[int] = []
    async with open_lab("OBJ", TwoPrivateHelpers, fired) as lab:
        at = now_ms() + HOUR_MS
        await lab.obj.renew_at(at)
        await lab.rt.evict(lab.obj)  # no in-memory timer: only the physical alarm is left
        await lab.clock.advance(2 * HOUR_MS)
        assert fired == [at]


@on_hosts
def test_helpers_given_one_context_attach_to_one_scheduler(live: LiveObject) -> None:
    """The first helper given context= becomes the object's scheduler; later ones join it."""
    assert DurabilityScheduler.of(live.ctx) is None
    operations = Durability(context=live.ctx, handlers={"work": noop}, alarm_concurrency=3)
    scheduler = DurabilityScheduler.of(live.ctx)
    assert scheduler is not None
    alarms = DurabilityAlarms(context=live.ctx, handlers={"renew": noop}, alarm_concurrency=3)
    log: DurabilityLog[Any] = DurabilityLog(context=live.ctx)
    assert operations._engine is alarms._engine is scheduler._engine
    assert DurabilityScheduler.of(live.ctx) is scheduler
    assert log.max_batch_size == 100


@on_hosts
def test_helpers_given_context_join_an_explicit_scheduler(live: LiveObject) -> None:
    """A scheduler built first is the one a helper given context= attaches to."""
    scheduler = DurabilityScheduler(context=live.ctx, alarm_concurrency=4)
    operations = Durability(context=live.ctx, handlers={"work": noop})
    assert operations._engine is scheduler._engine
    assert DurabilityScheduler.of(live.ctx) is scheduler


@on_hosts
def test_a_second_explicit_scheduler_says_to_pass_scheduler(live: LiveObject) -> None:
    """DurabilityScheduler(context=ctx) twice, or after a helper made one, raises."""
    helper = Durability(context=live.ctx, handlers={"work": noop})
    with pytest.raises(ValueError, match="pass scheduler= to share it"):
        DurabilityScheduler(context=live.ctx)
    other = SimpleNamespace(id="other", storage=live.ctx.storage)
    first = DurabilityScheduler(context=other)
    with pytest.raises(ValueError, match="already has a DurabilityScheduler"):
        DurabilityScheduler(context=other)
    assert DurabilityScheduler.of(other) is first
    assert DurabilityScheduler.of(live.ctx) is helper._engine.handle


@on_hosts
def test_options_are_validated_before_the_one_scheduler_check(live: LiveObject) -> None:
    """A bad option or handler is reported as such, not as a second scheduler."""
    scheduler = DurabilityScheduler(context=live.ctx)
    with pytest.raises(ValueError, match="alarm_concurrency must be a positive integer"):
        DurabilityScheduler(context=live.ctx, alarm_concurrency=0)
    with pytest.raises(ValueError, match="alarm_min_delay_ms must be between"):
        Durability(context=live.ctx, handlers={"work": noop}, alarm_min_delay_ms=1)
    with pytest.raises(ValueError, match='"alarm" is reserved by DurabilityAlarms'):
        DurabilityAlarms(context=live.ctx, handlers={"alarm": noop})
    assert DurabilityScheduler.of(live.ctx) is scheduler


@on_hosts
def test_differing_scheduler_options_raise(live: LiveObject) -> None:
    """A helper given context= with an option unlike the scheduler's raises ValueError."""
    scheduler = DurabilityScheduler(context=live.ctx, alarm_concurrency=4, live_timers=True)
    with pytest.raises(ValueError, match=r"alarm_concurrency differs from the object's scheduler"):
        Durability(context=live.ctx, handlers={"work": noop}, alarm_concurrency=5)
    with pytest.raises(ValueError, match=r"live_timers differs .*\(True\)"):
        DurabilityAlarms(context=live.ctx, handlers={"renew": noop}, live_timers=False)
    assert live.tables() == []  # nothing was migrated for the rejected helpers
    same = Durability(context=live.ctx, handlers={"work": noop}, alarm_concurrency=4)
    assert same._engine is scheduler._engine


def test_the_registry_needs_no_attribute_on_ctx_and_keeps_nothing_alive(
    live: LiveObject,
) -> None:
    """The runtime's ctx takes no attributes; a dropped object's scheduler is forgotten."""
    with pytest.raises(AttributeError):
        live.ctx.scheduler = None
    helper = Durability(context=live.ctx, handlers={"work": noop})
    assert DurabilityScheduler.of(live.ctx) is not None
    del helper
    gc.collect()
    assert DurabilityScheduler.of(live.ctx) is None
    DurabilityScheduler(context=live.ctx)


def test_of_is_per_ctx_object(live: LiveObject) -> None:
    """of(ctx) is None for any object other than the one a scheduler was built on."""
    scheduler = DurabilityScheduler(context=live.ctx)
    assert DurabilityScheduler.of(live.ctx) is scheduler
    assert DurabilityScheduler.of(SimpleNamespace(storage=live.ctx.storage)) is None
    assert DurabilityScheduler.of(object()) is None


@on_hosts
def test_a_raw_and_an_adapted_ctx_name_one_object(live: LiveObject) -> None:
    """Helpers given ctx and adapt(ctx) share one scheduler (a Cloudflare ctx too)."""
    operations = Durability(context=live.ctx, handlers={"work": noop})
    alarms = DurabilityAlarms(context=adapt(live.ctx), handlers={"renew": noop})
    assert operations._engine is alarms._engine
    assert DurabilityScheduler.of(adapt(live.ctx)) is DurabilityScheduler.of(live.ctx)
    with pytest.raises(ValueError, match="pass scheduler= to share it"):
        DurabilityScheduler(context=adapt(live.ctx))


@on_hosts
def test_a_log_keeps_its_place_on_the_objects_scheduler(live: LiveObject) -> None:
    """A log given context= holds the object's scheduler: a second log on it is refused."""
    log: DurabilityLog[Any] = DurabilityLog(context=live.ctx)
    gc.collect()
    assert DurabilityScheduler.of(live.ctx) is not None
    with pytest.raises(ValueError, match="A log helper is already attached"):
        DurabilityLog(context=live.ctx)
    assert log.max_batch_size == 100
