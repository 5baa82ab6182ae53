"""Named alarms on the real runtime under a virtual clock."""

from __future__ import annotations

import re
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any

import pytest

from _lab import Lab, open_lab
from _probe import Behaviour, Probe
from conftest import START_MS, LiveObject, MakeRuntime, noop
from durability import (
    AlarmMethodOptions,
    AttemptSettledEvent,
    Durability,
    DurabilityAlarms,
    DurabilityScheduler,
    DurableAlarmInfo,
    NonRetryableError,
    PurgedEvent,
    RetryPolicy,
    ScheduledEvent,
)
from durability.cloudflare import adapt
from durability.runtime import AlarmInvocationInfo, DurableObject

pytestmark = pytest.mark.usefixtures("host")

NAMES = ("renew", "strict", "lenient", "tick")


class Timers(DurableObject):
    """An object whose named alarms (on a private scheduler) do what the probe says."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.probe: Probe = env["PROBE"]
        self.alarms = DurabilityAlarms(
            context=ctx,
            handlers={name: self._handle for name in NAMES},
            on_lifecycle_event=self.probe.events.append,
            **self.probe.options,
        )

    async def _handle(self, info: DurableAlarmInfo) -> None:
        await self.probe.alarm_run(info)

    async def schedule(self, name: str, at: int) -> None:
        await self.alarms.named(name)(at)

    async def schedule_with(self, name: str, at: int, payload: Any) -> None:
        await self.alarms.named(name)(at, payload=payload)

    async def schedule_unserializable(self, name: str, at: int) -> str:
        try:
            await self.alarms.named(name)(at, payload={"when": datetime.now(UTC)})  # type: ignore[dict-item]
        except TypeError as error:
            return str(error)
        return "scheduled"

    async def schedule_at_datetime(self, name: str, iso: str) -> None:
        await self.alarms.named(name)(datetime.fromisoformat(iso))

    async def rows(self) -> list[dict[str, Any]]:
        return (
            adapt(self.ctx)
            .storage.sql.exec(
                "SELECT name, status, attempt, next_attempt_at, last_error_name, last_error "
                "FROM durability_alarms ORDER BY name"
            )
            .to_list()
        )

    async def purge(self, before: int) -> int:
        return await self.alarms.purge_before(before)

    async def alarm_at(self) -> int | None:
        return await adapt(self.ctx).storage.get_alarm()

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.alarms.alarm(info)


def lab(probe: Probe) -> AbstractAsyncContextManager[Lab[Probe]]:
    return open_lab("TIMERS", Timers, probe)


def parked(probe: Probe, gate: str, attempts: tuple[int, ...] = (1,)) -> Behaviour:
    async def behave(info: DurableAlarmInfo) -> None:
        if info.attempt in attempts:
            await probe.gate(gate).wait()

    return behave


async def test_far_alarm_runs_at_its_time_from_the_physical_alarm() -> None:
    """An occurrence beyond the min delay arms the alarm at its exact time and runs there."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.schedule("renew", START_MS + 3_600_000)
        assert await t.obj.alarm_at() == START_MS + 3_600_000
        await t.clock.advance(3_599_999)
        assert probe.runs == []
        await t.clock.advance(1)
        [info] = probe.runs
        assert probe.started_at == [START_MS + 3_600_000]
        assert (info.name, info.scheduled_time, info.attempt) == ("renew", START_MS + 3_600_000, 1)
        assert (info.is_retry, info.retry_count) == (False, 0)
        assert info.idempotency_key.startswith("durability-alarm:v1:")
        assert info.platform is not None
        assert (info.platform.retry_count, info.platform.is_retry) == (0, False)
        assert await t.obj.rows() == []
        assert await t.obj.alarm_at() is None


async def test_payload_reaches_every_attempt_and_survives_eviction() -> None:
    """renew(at, payload=...) hands the JSON value to each attempt; a one-shot's occurrence
    is None; without a payload info.payload is None."""
    probe = Probe(retries=RetryPolicy(delay=lambda attempt: 1_000))

    async def flaky(info: DurableAlarmInfo) -> None:
        if info.attempt == 1:
            raise RuntimeError("try again")

    probe.behaviour["renew"] = flaky
    async with lab(probe) as t:
        payload = {"plan": "pro", "period": 3, "seats": [1, 2.5, None, True]}
        await t.obj.schedule_with("renew", START_MS + 3_600_000, payload)
        await t.obj.schedule("tick", START_MS + 3_600_000)
        await t.rt.evict(t.obj)
        await t.clock.advance(3_601_000)
        renew = [info for info in probe.runs if info.name == "renew"]
        assert [(info.attempt, info.payload, info.occurrence) for info in renew] == [
            (1, payload, None),
            (2, payload, None),
        ]
        [tick] = [info for info in probe.runs if info.name == "tick"]
        assert (tick.payload, tick.occurrence) == (None, None)


async def test_rescheduling_replaces_the_payload() -> None:
    """Scheduling a name again keeps only the new payload (none clears it)."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.schedule_with("renew", START_MS + 60_000, "first")
        await t.obj.schedule_with("renew", START_MS + 60_000, "second")
        await t.clock.advance(60_000)
        await t.obj.schedule_with("renew", START_MS + 120_000, ["third"])
        await t.obj.schedule("renew", START_MS + 120_000)
        await t.clock.advance(60_000)
        assert [info.payload for info in probe.runs] == ["second", None]


async def test_a_payload_that_is_not_json_raises_and_stores_nothing() -> None:
    """A non-JSON payload raises TypeError naming payload; the pending occurrence stays."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.schedule_with("renew", START_MS + 60_000, {"n": 1})
        message = await t.obj.schedule_unserializable("renew", START_MS + 1_000)
        assert "payload" in message
        [row] = await t.obj.rows()
        assert row["next_attempt_at"] == START_MS + 60_000
        await t.clock.advance(60_000)
        assert [info.payload for info in probe.runs] == [{"n": 1}]


async def test_near_alarm_runs_on_time_from_the_early_timer() -> None:
    """An occurrence due before the min delay starts at its exact time, without platform info."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.schedule("renew", START_MS + 3_000)
        assert await t.obj.alarm_at() == START_MS + 15_000
        await t.clock.advance(3_000)
        assert probe.started_at == [START_MS + 3_000]
        assert probe.runs[0].platform is None


async def test_near_alarm_runs_after_eviction_at_most_min_delay_late() -> None:
    """Evicted before its timer fired, a near-term occurrence runs when the alarm fires."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.schedule("renew", START_MS + 3_000)
        await t.rt.evict(t.obj)
        await t.clock.advance(14_999)
        assert probe.runs == []
        await t.clock.advance(1)
        assert probe.started_at == [START_MS + 15_000]


async def test_scheduling_again_replaces_the_pending_occurrence() -> None:
    """Only the replacement runs, once, at its own time."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.schedule("renew", START_MS + 60_000)
        await t.obj.schedule("renew", START_MS + 120_000)
        await t.clock.advance(600_000)
        assert probe.started_at == [START_MS + 120_000]
        scheduled = [e for e in probe.events if isinstance(e, ScheduledEvent)]
        assert [e.scheduled_time for e in scheduled] == [START_MS + 60_000, START_MS + 120_000]
        assert scheduled[0].generation != scheduled[1].generation
        assert probe.runs[0].idempotency_key.endswith(scheduled[1].generation)
        assert all((e.alarm, e.id, e.attempt) == ("renew", "renew", 0) for e in scheduled)


async def test_idempotency_key_is_stable_across_retries_and_new_per_schedule() -> None:
    """Retries of one occurrence share its key; the next schedule gets a new one."""
    probe = Probe(retries=RetryPolicy(delay=lambda attempt: 1_000))

    async def fail_first(info: DurableAlarmInfo) -> None:
        if info.attempt == 1:
            raise RuntimeError("payments down")

    probe.behaviour["renew"] = fail_first
    async with lab(probe) as t:
        await t.obj.schedule("renew", START_MS)
        await t.clock.advance(1_000)
        first, retry = probe.runs
        assert (retry.attempt, retry.is_retry, retry.retry_count) == (2, True, 1)
        assert first.idempotency_key == retry.idempotency_key
        await t.obj.schedule("renew", START_MS + 2_000)
        await t.clock.advance(1_000)
        assert probe.runs[2].idempotency_key != first.idempotency_key
        assert probe.runs[2].attempt == 1


async def test_timeouts_are_terminal_unless_retry_timeouts() -> None:
    """A timed-out occurrence fails at once; with retry_timeouts it is retried."""
    probe = Probe(
        attempt_timeout_ms=1_000,
        retries=RetryPolicy(delay=lambda attempt: 500),
        methods={"lenient": AlarmMethodOptions(retry_timeouts=True)},
    )
    probe.behaviour["strict"] = parked(probe, "never")
    probe.behaviour["lenient"] = parked(probe, "never")
    async with lab(probe) as t:
        await t.obj.schedule("strict", START_MS)
        await t.obj.schedule("lenient", START_MS)
        await t.clock.advance(60_000)
        assert [(i.name, i.attempt) for i in probe.runs] == [
            ("strict", 1),
            ("lenient", 1),
            ("lenient", 2),
        ]
        assert await t.obj.rows() == [
            {
                "name": "strict",
                "status": "failed",
                "attempt": 1,
                "next_attempt_at": START_MS + 1_000,
                "last_error_name": "DurableAlarmTimeoutError",
                "last_error": 'Durable alarm "strict" timed out after 1000ms',
            }
        ]
        assert probe.runs[0].signal.aborted


async def test_success_deletes_only_the_occurrence_that_ran() -> None:
    """A handler that schedules its next occurrence keeps recurring."""
    probe = Probe()
    alarms_ref: list[Any] = []

    async def recur(info: DurableAlarmInfo) -> None:
        await alarms_ref[0](info.scheduled_time + 1_000)

    probe.behaviour["tick"] = recur
    async with lab(probe) as t:
        await t.obj.schedule("tick", START_MS)
        alarms_ref.append(lambda at: t.obj.schedule("tick", at))
        await t.clock.advance(4_000)
        assert probe.started_at == [
            START_MS,
            START_MS + 1_000,
            START_MS + 2_000,
            START_MS + 3_000,
            START_MS + 4_000,
        ]
        [row] = await t.obj.rows()
        assert (row["status"], row["next_attempt_at"]) == ("pending", START_MS + 5_000)


async def test_replacement_while_running_waits_for_the_old_handler() -> None:
    """One name runs once at a time; the old success cannot delete the replacement."""
    probe = Probe()
    probe.behaviour["renew"] = parked(probe, "old")
    async with lab(probe) as t:
        await t.obj.schedule("renew", START_MS)
        await t.clock.run_until_idle()
        await t.obj.schedule("renew", START_MS + 1_000)
        await t.clock.advance(5_000)
        assert len(probe.runs) == 1
        probe.gate("old").set()
        await t.clock.run_until_idle()
        assert len(probe.runs) == 2
        assert probe.runs[0].idempotency_key != probe.runs[1].idempotency_key
        assert probe.max_per_key == 1
        assert await t.obj.rows() == []


async def test_failed_occurrence_stays_until_rescheduled() -> None:
    """A terminal failure keeps the row as failed; scheduling again runs a new occurrence."""
    probe = Probe()

    async def refuse_first(info: DurableAlarmInfo) -> None:
        if len(probe.runs) == 1:
            raise NonRetryableError("card expired")

    probe.behaviour["renew"] = refuse_first
    async with lab(probe) as t:
        await t.obj.schedule("renew", START_MS)
        await t.clock.advance(60_000)
        [row] = await t.obj.rows()
        assert (row["status"], row["last_error"]) == ("failed", "card expired")
        assert await t.obj.alarm_at() is None
        await t.obj.schedule("renew", START_MS + 61_000)
        await t.clock.advance(1_000)
        assert len(probe.runs) == 2
        assert await t.obj.rows() == []


class CardExpiredError(Exception):
    """A vendor's exception the alarm's policy names as non-retryable."""


async def test_policy_non_retryable_classes_fail_an_occurrence_at_once() -> None:
    """An occurrence raising a class in RetryPolicy.non_retryable is failed on attempt 1."""
    probe = Probe(retries=RetryPolicy(non_retryable=(CardExpiredError,)))

    async def expired(info: DurableAlarmInfo) -> None:
        raise CardExpiredError("card expired")

    probe.behaviour["renew"] = expired
    async with lab(probe) as t:
        await t.obj.schedule("renew", START_MS)
        await t.clock.advance(60_000)
        assert len(probe.runs) == 1
        [row] = await t.obj.rows()
        assert (row["status"], row["last_error_name"], row["attempt"]) == (
            "failed",
            "CardExpiredError",
            1,
        )


async def test_interrupted_occurrence_runs_again_alone_then_exhausts() -> None:
    """max_attempts=1: an occurrence cut off by eviction beside others runs again alone;
    cut off alone too, it fails with the exhausted error, counting both interruptions."""
    probe = Probe(retries=RetryPolicy(max_attempts=1))
    probe.behaviour["renew"] = parked(probe, "never", attempts=(1, 2))
    async with lab(probe) as t:
        await t.obj.schedule("renew", START_MS)
        await t.clock.run_until_idle()
        await t.rt.evict(t.obj)
        await t.clock.advance(15_000)
        assert [run.attempt for run in probe.runs] == [1, 2]
        await t.rt.evict(t.obj)
        await t.clock.advance(15_000)
        assert len(probe.runs) == 2
        [row] = await t.obj.rows()
        assert (row["status"], row["last_error"]) == (
            "failed",
            'Durable named alarm "renew" exhausted its 1 attempts (2 interrupted: the '
            "process stopped or the object was evicted while its handler ran)",
        )


async def test_purge_deletes_counts_and_aborts_running() -> None:
    """purge_before removes occurrences created before the cutoff and aborts their signal."""
    probe = Probe()
    probe.behaviour["renew"] = parked(probe, "never")
    async with lab(probe) as t:
        await t.obj.schedule("renew", START_MS)
        await t.obj.schedule("tick", START_MS + 3_600_000)
        await t.clock.run_until_idle()
        await t.clock.advance(10)
        await t.obj.schedule("strict", START_MS + 3_600_000)
        assert await t.obj.purge(START_MS + 10) == 2
        assert [row["name"] for row in await t.obj.rows()] == ["strict"]
        signal = probe.runs[0].signal
        assert signal.aborted and str(signal.reason) == "Durable alarm was purged"
        [purged] = [e for e in probe.events if isinstance(e, PurgedEvent)]
        assert (purged.entity_kind, purged.before, purged.count) == (
            "named_alarm",
            START_MS + 10,
            2,
        )


async def test_schedule_accepts_aware_datetimes_and_rejects_bad_times() -> None:
    """Times are ms or aware datetimes; naive datetimes and negatives raise ValueError."""
    probe = Probe()
    async with lab(probe) as t:
        at = datetime.fromtimestamp((START_MS + 60_000) / 1000, tz=UTC)
        await t.obj.schedule_at_datetime("renew", at.isoformat())
        assert (await t.obj.rows())[0]["next_attempt_at"] == START_MS + 60_000
        with pytest.raises(ValueError, match="aware datetime"):
            await t.obj.schedule_at_datetime("renew", "2030-01-01T00:00:00")
        with pytest.raises(ValueError, match="scheduled_time must be a non-negative"):
            await t.obj.schedule("renew", -5)
        assert (await t.obj.rows())[0]["next_attempt_at"] == START_MS + 60_000


def _aware(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


async def test_aware_datetimes_are_accepted_where_times_are(live: LiveObject) -> None:
    """Named-alarm times, purge cutoffs and `set_alarm` take aware datetimes as ms."""
    seen: list[DurableAlarmInfo] = []
    scheduler = DurabilityScheduler(context=live.ctx)
    alarms = DurabilityAlarms(scheduler=scheduler, handlers={"renew": seen.append})
    operations = Durability(scheduler=scheduler, handlers={"charge": noop})
    await alarms.renew(_aware(START_MS + 5_000))
    await live.clock.advance(5_000)
    assert [info.scheduled_time for info in seen] == [START_MS + 5_000]
    await operations.charge(id="a", payload=1)
    assert await operations.purge_before(_aware(START_MS + 5_001)) == 1
    assert await alarms.purge_before(_aware(START_MS)) == 0
    storage = adapt(live.ctx).storage
    await storage.set_alarm(_aware(START_MS + 9_000))
    assert await storage.get_alarm() == START_MS + 9_000


async def test_naive_datetimes_are_rejected(live: LiveObject) -> None:
    """A naive datetime is ambiguous and raises `ValueError` naming the argument."""
    alarms = DurabilityAlarms(context=live.ctx, handlers={"renew": noop})
    with pytest.raises(ValueError, match="scheduled_time"):
        await alarms.renew(datetime(2030, 1, 1))
    with pytest.raises(ValueError, match="ms must be an aware datetime"):
        await alarms.purge_before(datetime(2030, 1, 1))
    with pytest.raises(ValueError, match="before must be an aware datetime"):
        await alarms.purge_before(before=datetime(2030, 1, 1))


async def test_lifecycle_events_name_the_alarm() -> None:
    """Attempt events of named alarms carry entity_kind named_alarm and the name."""
    probe = Probe()
    async with lab(probe) as t:
        await t.obj.schedule("renew", START_MS)
        await t.clock.run_until_idle()
        kinds = [type(e).__name__ for e in probe.events]
        assert kinds == ["ScheduledEvent", "AttemptStartedEvent", "AttemptSettledEvent"]
        settled = probe.events[2]
        assert isinstance(settled, AttemptSettledEvent)
        assert (settled.entity_kind, settled.alarm, settled.operation, settled.outcome) == (
            "named_alarm",
            "renew",
            None,
            "completed",
        )


async def test_migrate_classmethod_moves_the_named_alarm_schema(make_runtime: MakeRuntime) -> None:
    """DurabilityAlarms.migrate(ctx, None) drops durability_alarms; LATEST recreates it."""

    class Migrating(DurableObject):
        async def cycle(self) -> list[Any]:
            DurabilityAlarms(context=self.ctx, handlers={"x": print})
            down = DurabilityAlarms.migrate(self.ctx, target=None)
            tables = "SELECT COUNT(*) AS n FROM sqlite_master WHERE name = 'durability_alarms'"
            gone = adapt(self.ctx).storage.sql.exec(tables).one()["n"]
            up = DurabilityAlarms.migrate(self.ctx)
            back = adapt(self.ctx).storage.sql.exec(tables).one()["n"]
            return [len(down.rolled_back), gone, len(up.applied), back]

    async with make_runtime(bindings={"MIG": Migrating}) as rt:
        rolled_back, gone, applied, back = await rt.env.MIG.get_by_name("m").cycle()
        assert (gone, back) == (0, 1)
        assert rolled_back == applied > 0


INVALID_OPTIONS: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"handlers": {"renew": 1}}, TypeError, "handlers.renew"),
    ({"attempt_timeout_ms": -1}, ValueError, "attempt_timeout_ms must be a positive integer"),
    ({"on_lifecycle_event": 1}, TypeError, "on_lifecycle_event must be callable"),
    (
        {"methods": {"run": AlarmMethodOptions(retry_timeouts="yes")}},  # type: ignore[arg-type]
        TypeError,
        "methods.run.retry_timeouts",
    ),
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
        DurabilityAlarms(context=live.ctx, **{"handlers": {"run": noop}, **options})
    assert live.tables() == []
