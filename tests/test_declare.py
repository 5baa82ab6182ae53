"""Handlers declared on the class: `Durable`, `@operation`, `@named_alarm`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

import pytest

from _lab import open_lab
from conftest import START_MS, LiveObject
from durability import (
    Durability,
    DurabilityAlarms,
    DurabilityLog,
    DurabilityScheduler,
    Durable,
    DurableAlarmInfo,
    DurableCall,
    RetryPolicy,
    named_alarm,
    now_ms,
    operation,
)
from durability._declare import NamedAlarmMethod, OperationMethod
from durability.runtime import AlarmInvocationInfo, DurableObject

on_hosts = pytest.mark.usefixtures("host")
"""On the embedded runtime and on both Cloudflare doubles."""

DAY_MS = 24 * 60 * 60 * 1000


class CardDeclinedError(Exception):
    """The payment provider refused the card: retrying will not help."""


class Billing(Durable, DurableObject):
    """Charges with retries, and a renewal alarm that charges again."""

    scheduler_options: ClassVar[dict[str, Any]] = {"alarm_concurrency": 20}

    @operation(
        retries=RetryPolicy(
            max_attempts=3, delay=lambda attempt: 1_000, non_retryable=(CardDeclinedError,)
        ),
        attempt_timeout_ms=30_000,
    )
    async def charge(self, call: DurableCall[dict[str, Any]]) -> dict[str, Any]:
        seen: list[Any] = self.env["PROBE"]
        seen.append(("charge", call.id, call.attempt, call.payload))
        if call.payload.get("declined"):
            raise CardDeclinedError("card declined")
        if call.attempt < call.payload.get("succeed_on", 1):
            raise RuntimeError("provider unavailable")
        return {"charged": call.id, "by": str(self.ctx.id.name)}

    @named_alarm(retry_timeouts=False)
    async def renew(self, info: DurableAlarmInfo) -> None:
        seen: list[Any] = self.env["PROBE"]
        seen.append(("renew", info.scheduled_time, info.payload))
        await self.charge(f"charge:{info.payload}", {"period": info.payload})

    async def subscribe(self) -> None:
        await self.charge("charge:0", {"period": 0})
        await self.renew(now_ms() + 30 * DAY_MS, payload=1)

    async def start(self, id: str, payload: dict[str, Any]) -> None:
        await self.charge(id, payload)

    async def result(self, id: str) -> dict[str, Any]:
        outcome = await self.charge.get_result(id)
        error = None if outcome.error is None else outcome.error.name
        return {"status": outcome.status, "result": outcome.result, "error": error}

    async def handles(self) -> list[str]:
        return [
            type(self.charge).__name__,
            type(self.renew).__name__,
            str(self.charge is self.durability.charge),
            str(self.renew is self.alarms.renew),
            str(self.scheduler is DurabilityScheduler.of(self.ctx)),
            str(self.scheduler._engine.options.alarm_concurrency),
        ]


@on_hosts
async def test_declared_handlers_run_through_the_objects_scheduler() -> None:
    """@operation and @named_alarm methods run with (self, argument), by the alarm too."""
    seen: list[Any] = []
    async with open_lab("BILLING", Billing, seen) as lab:
        await lab.obj.subscribe()
        await lab.clock.run_until_idle()
        assert seen == [("charge", "charge:0", 1, {"period": 0})]
        assert await lab.obj.result("charge:0") == {
            "status": "completed",
            "result": {"charged": "charge:0", "by": "a"},
            "error": None,
        }
        await lab.rt.evict(lab.obj)  # only the physical alarm, through Durable.alarm, is left
        await lab.clock.advance(30 * DAY_MS)
        assert seen[1:] == [
            ("renew", START_MS + 30 * DAY_MS, 1),
            ("charge", "charge:1", 1, {"period": 1}),
        ]


async def test_instance_attributes_are_the_handles() -> None:
    """self.charge is the DurableOperation, self.renew the NamedAlarm; options applied."""
    async with open_lab("BILLING", Billing, list[Any]()) as lab:
        assert await lab.obj.handles() == [
            "DurableOperation",
            "NamedAlarm",
            "True",
            "True",
            "True",
            "20",
        ]
    assert isinstance(Billing.charge, OperationMethod)
    assert isinstance(Billing.renew, NamedAlarmMethod)


@on_hosts
async def test_per_method_options_reach_the_policy() -> None:
    """The decorator's retries (with non_retryable) govern the operation's attempts."""
    seen: list[Any] = []
    async with open_lab("BILLING", Billing, seen) as lab:
        await lab.obj.start("flaky", {"succeed_on": 3})
        await lab.obj.start("never", {"succeed_on": 9})
        await lab.obj.start("declined", {"declined": True})
        await lab.clock.advance(10_000)
        attempts = [(id, attempt) for _, id, attempt, _ in seen]
        assert attempts.count(("flaky", 3)) == 1
        assert [a for id, a in attempts if id == "never"] == [1, 2, 3]
        assert [a for id, a in attempts if id == "declined"] == [1]
        assert (await lab.obj.result("flaky"))["status"] == "completed"
        assert await lab.obj.result("never") == {
            "status": "failed",
            "result": None,
            "error": "RuntimeError",
        }
        assert (await lab.obj.result("declined"))["error"] == "CardDeclinedError"


class Slow(Durable, DurableObject):
    """An operation whose attempts outlive their timeout."""

    @operation(attempt_timeout_ms=1_000, retries=RetryPolicy(max_attempts=1))
    async def wait(self, call: DurableCall) -> None:
        await asyncio.sleep(5)

    async def start(self) -> None:
        await self.wait("w")

    async def status(self) -> list[Any]:
        outcome = await self.wait.get_result("w")
        return [outcome.status, None if outcome.error is None else outcome.error.name]


@on_hosts
async def test_decorator_attempt_timeout_applies() -> None:
    """@operation(attempt_timeout_ms=...) bounds each attempt of that operation."""
    async with open_lab("SLOW", Slow, None) as lab:
        await lab.obj.start()
        await lab.clock.advance(2_000)
        assert await lab.obj.status() == ["failed", "DurableAttemptTimeoutError"]


class Base(Durable, DurableObject):
    """A base class with one operation and one named alarm."""

    @operation
    def ping(self, call: DurableCall) -> str:
        return "base"

    @named_alarm
    def tick(self, info: DurableAlarmInfo) -> None:
        self.env["PROBE"].append(("tick", "base"))


class Derived(Base):
    """Inherits `tick`, replaces `ping`, adds `pong` and a named alarm `tock`."""

    @operation
    def ping(self, call: DurableCall) -> str:
        return "derived"

    @operation
    def pong(self, call: DurableCall) -> str:
        return "pong"

    @named_alarm
    def tock(self, info: DurableAlarmInfo) -> None:
        self.env["PROBE"].append(("tock", info.payload))

    async def run(self) -> list[Any]:
        await self.ping("a")
        await self.pong("b")
        await self.tick(now_ms())
        await self.tock(now_ms(), payload="p")
        return sorted(self.durability._handlers) + sorted(self.alarms._handlers)

    async def results(self) -> list[Any]:
        return [(await self.ping.get_result("a")).result, (await self.pong.get_result("b")).result]


@on_hosts
async def test_subclasses_inherit_and_add_declarations() -> None:
    """A subclass keeps inherited handlers, overrides by name and adds its own."""
    seen: list[Any] = []
    async with open_lab("DERIVED", Derived, seen) as lab:
        assert await lab.obj.run() == ["ping", "pong", "tick", "tock"]
        await lab.clock.run_until_idle()
        assert await lab.obj.results() == ["derived", "pong"]
        assert sorted(seen) == [("tick", "base"), ("tock", "p")]


class OwnAlarm(Durable, DurableObject):
    """Defines its own alarm() and calls super().alarm(info)."""

    @named_alarm
    def tick(self, info: DurableAlarmInfo) -> None:
        self.env["PROBE"].append("tick")

    async def schedule(self) -> None:
        await self.tick(now_ms() + DAY_MS)

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        self.env["PROBE"].append("alarm")
        await super().alarm(info)


@on_hosts
async def test_own_alarm_calling_super_runs_the_pass() -> None:
    """A class's own alarm() that awaits super().alarm(info) still runs named alarms."""
    seen: list[str] = []
    async with open_lab("OWN", OwnAlarm, seen) as lab:
        await lab.obj.schedule()
        await lab.rt.evict(lab.obj)
        await lab.clock.advance(DAY_MS)
        assert seen == ["alarm", "tick"]


class OnlyAlarms(Durable, DurableObject):
    """Named alarms only, plus a log built by hand on the same ctx."""

    @named_alarm
    def tick(self, info: DurableAlarmInfo) -> None:
        """Nothing to do."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.log: DurabilityLog[Any] = DurabilityLog(context=ctx)
        self.extra = Durability(context=ctx, handlers={"by_hand": self._by_hand})

    def _by_hand(self, call: DurableCall) -> str:
        return "by hand"

    async def shape(self) -> list[Any]:
        await self.extra.by_hand("x")
        return [
            hasattr(self, "durability"),
            self.extra._engine is self.scheduler._engine is self.alarms._engine,
        ]

    async def by_hand_result(self) -> Any:
        return (await self.extra.by_hand.get_result("x")).result


@on_hosts
async def test_helpers_built_by_hand_join_the_declared_scheduler() -> None:
    """Without @operation there is no self.durability; hand-built helpers share the scheduler."""
    async with open_lab("ONLY", OnlyAlarms, None) as lab:
        assert await lab.obj.shape() == [False, True]
        await lab.clock.run_until_idle()
        assert await lab.obj.by_hand_result() == "by hand"


class LogFirst(Durable, DurableObject):
    """Builds a log on ctx before Durable.__init__ runs."""

    @operation
    def work(self, call: DurableCall) -> str:
        return "done"

    def __init__(self, ctx: Any, env: Any) -> None:
        self.log: DurabilityLog[Any] = DurabilityLog(context=ctx)
        super().__init__(ctx, env)

    async def shared(self) -> bool:
        await self.work("w")
        return self.log._engine is self.scheduler._engine is self.durability._engine


@on_hosts
async def test_durable_joins_a_scheduler_built_before_it() -> None:
    """A helper built on ctx before super().__init__ made the scheduler Durable joins."""
    async with open_lab("FIRST", LogFirst, None) as lab:
        assert await lab.obj.shared() is True


class Narrow(Durable, DurableObject):
    """Asks for three permits."""

    scheduler_options: ClassVar[dict[str, Any]] = {"alarm_concurrency": 3}

    @operation
    def work(self, call: DurableCall) -> None:
        """Nothing to do."""


def test_durable_refuses_a_scheduler_with_other_options(live: LiveObject) -> None:
    """Joining a scheduler whose options differ from scheduler_options raises ValueError."""
    alarms = DurabilityAlarms(context=live.ctx, handlers={"x": print}, alarm_concurrency=7)
    with pytest.raises(ValueError, match=r"alarm_concurrency differs .*\(7\)"):
        Narrow(live.ctx, {})
    assert DurabilityScheduler.of(live.ctx) is alarms._engine.handle


class Early(Durable, DurableObject):
    """Touches its handle before Durable.__init__ has built it."""

    @operation
    def work(self, call: DurableCall) -> None:
        """Nothing to do."""

    def __init__(self, ctx: Any, env: Any) -> None:
        self.work("too-early")  # type: ignore[unused-coroutine]
        super().__init__(ctx, env)

    async def run(self) -> None:
        """Never reached: construction fails."""


@on_hosts
async def test_a_handle_used_before_init_says_so() -> None:
    """self.<operation> before super().__init__ raises AttributeError naming the fix."""
    async with open_lab("EARLY", Early, None) as lab:
        with pytest.raises(AttributeError, match=r"call super\(\).__init__\(ctx, env\) first"):
            await lab.obj.run()


class FailsOnce(Durable, DurableObject):
    """Its first construction fails after Durable.__init__ built the scheduler."""

    @operation
    def work(self, call: DurableCall) -> str:
        return "done"

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        attempts: list[int] = self.env["PROBE"]
        attempts.append(len(attempts))
        if len(attempts) == 1:
            raise RuntimeError("config missing")

    async def run(self) -> None:
        await self.work("w")


@on_hosts
async def test_a_failed_construction_leaves_no_scheduler_behind() -> None:
    """After a constructor raised, the next call builds the object and its scheduler anew."""
    async with open_lab("FAILS", FailsOnce, list[Any]()) as lab:
        with pytest.raises(RuntimeError, match="config missing"):
            await lab.obj.run()
        await lab.obj.run()


@on_hosts
def test_a_helper_failing_in_durable_init_releases_the_scheduler(live: LiveObject) -> None:
    """When building a helper fails (here its migration), ctx keeps no scheduler."""
    live.ctx.storage.sql.exec("CREATE TABLE durability_calls (unrelated TEXT)")
    with pytest.raises(Exception, match="already exists"):
        Billing(live.ctx, {"PROBE": []})
    assert DurabilityScheduler.of(live.ctx) is None
    live.ctx.storage.sql.exec("DROP TABLE durability_calls")
    assert Billing(live.ctx, {"PROBE": []}).scheduler is DurabilityScheduler.of(live.ctx)


@pytest.mark.parametrize(
    ("decorator", "name", "owner"),
    [
        (operation, "alarm", "Durability"),
        (operation, "purge_before", "Durability"),
        (operation, "operation", "Durability"),
        (operation, "migrate", "Durability"),
        (named_alarm, "named", "DurabilityAlarms"),
        (named_alarm, "alarm", "DurabilityAlarms"),
        (operation, "scheduler", "Durable"),
        (named_alarm, "durability", "Durable"),
        (operation, "alarms", "Durable"),
        (operation, "ctx", "Durable"),
    ],
)
def test_reserved_names_raise_when_the_class_is_defined(
    decorator: Any, name: str, owner: str
) -> None:
    """A decorated method named like a helper's or Durable's attribute is a ValueError."""

    def handler(self: Any, argument: Any) -> None:
        """Never runs."""

    with pytest.raises(ValueError, match=f'"{name}" is reserved by {owner}$'):
        type("Bad", (Durable, DurableObject), {name: decorator(handler)})


def test_decorator_options_are_validated() -> None:
    """Bad per-method options raise when decorating, naming the option."""
    with pytest.raises(ValueError, match="attempt_timeout_ms must be a positive integer"):
        operation(attempt_timeout_ms=0)
    with pytest.raises(TypeError, match="retries must be a RetryPolicy"):
        named_alarm(retries=3)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="retry_timeouts must be a bool"):
        named_alarm(retry_timeouts="yes")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="@operation target must be callable"):
        operation()(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"alarm_concurrency": 0}, ValueError, "alarm_concurrency must be a positive integer"),
        ({"storage_backend": "kv"}, TypeError, "unknown scheduler option storage_backend"),
        ([("alarm_concurrency", 2)], TypeError, "scheduler_options must be a mapping"),
    ],
)
def test_scheduler_options_are_checked_when_the_class_is_defined(
    options: Any, error: type[Exception], message: str
) -> None:
    """A bad scheduler_options raises at class definition, naming the option."""
    with pytest.raises(error, match=message):
        type("Bad", (Durable, DurableObject), {"scheduler_options": options})


class Renewals(Durable, DurableObject):
    """A named alarm that counts its runs in storage, on a file-backed runtime."""

    @named_alarm
    async def renew(self, info: DurableAlarmInfo) -> None:
        self.env["PROBE"].append(info.payload)
        count = info.payload
        assert isinstance(count, int)
        if count < 3:
            await self.renew(info.scheduled_time + DAY_MS, payload=count + 1)

    async def start(self) -> None:
        await self.renew(now_ms() + DAY_MS, payload=0)


@on_hosts
async def test_declared_alarms_survive_crashes_and_restarts(tmp_path: Path) -> None:
    """Crashed instances are rebuilt by the runtime; every occurrence runs once."""
    seen: list[int] = []
    async with open_lab("RENEWALS", Renewals, seen, path=tmp_path) as lab:
        await lab.obj.start()
        for _ in range(4):
            await lab.rt.crash(lab.obj)
            await lab.clock.advance(DAY_MS)
        assert seen == [0, 1, 2, 3]
