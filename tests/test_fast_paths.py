"""The engine's shortcuts give the same outcomes as the general paths they bypass."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
from types import SimpleNamespace
from typing import Any

import pytest

from conftest import START_MS, MakeRuntime
from durability import (
    AbortSignal,
    AttemptSettledEvent,
    Durability,
    DurabilityAlarms,
    DurableAlarmInfo,
    DurableCall,
    now_ms,
)
from durability._engine.tables import TableSpec, claim_attempt, claim_suspect, is_exhausted
from durability._frozen import frozen_with
from durability._operations.calls import CallExecutor
from durability._serialization import serialize
from durability._uuid import random_uuid
from durability.runtime import DurableObject, Runtime
from durability.testing import VirtualClock

MIN_DELAY = 5_000
CALLS = TableSpec("durability_calls", "id")


class Lab(DurableObject):
    """Operations whose handlers wait on a gate; test hooks reach the engine and its rows."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.options: dict[str, Any] = env["OPTIONS"]
        self.gate = asyncio.Event()
        self.calls: list[tuple[str, int]] = []
        self.passes = 0
        self.durability = Durability(
            context=ctx,
            handlers={"work": self._work},
            alarm_min_delay_ms=MIN_DELAY,
            **self.options,
        )
        engine = self.durability._engine
        run_due = engine.participants[0].run_due

        async def counted(now: int, info: Any) -> None:
            self.passes += 1
            await run_due(now, info)

        engine.participants[0].run_due = counted

    async def _work(self, call: DurableCall) -> Any:
        self.calls.append((call.id, call.attempt))
        if call.id.startswith("cancel-self") and call.attempt == 1:
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
            await asyncio.sleep(0)
        await self.gate.wait()
        return call.attempt

    async def status(self, id: str) -> list[Any]:
        result = await self.durability.work.get_result(id)
        return [result.status, result.attempt, result.result]

    async def register(self, id: str) -> None:
        await self.durability.work(id=id)

    async def release(self) -> None:
        self.gate.set()

    async def seed(self, id: str, due_at: int) -> None:
        """A pending row due at `due_at` that no handler runs yet (written directly)."""
        self.ctx.storage.sql.exec(
            "INSERT INTO durability_calls (id, operation, payload, status, attempt, "
            "next_attempt_at, generation_id, created_at) "
            "VALUES (?, 'work', '{\"kind\":\"value\",\"value\":null}', 'pending', 0, ?, ?, ?)",
            id,
            due_at,
            random_uuid(),
            due_at,
        )

    async def arm_and_register(self, at: int | None, id: str) -> int | None:
        """Arm the alarm at `at`, write registration `id` as a turn's batch does, return
        the alarm (all in one turn: an alarm in the past would fire at the next)."""
        if at is None:
            await self.ctx.storage.delete_alarm()
        else:
            await self.ctx.storage.set_alarm(at)
        now = now_ms()
        row = (id, "work", '{"kind":"value","value":null}', now, random_uuid(), now)
        assert await self.durability._registrations.write([row]) == [True]
        return await self.ctx.storage.get_alarm()

    async def observed(self) -> dict[str, Any]:
        return {"calls": [list(call) for call in self.calls], "passes": self.passes}

    async def claims(self, id: str, seen: int, due_by_offset: int) -> list[Any]:
        """Claim `id` as read with `seen` attempts at now + `due_by_offset`; check exhaustion."""
        sql = self.ctx.storage.sql
        row = sql.exec("SELECT generation_id FROM durability_calls WHERE id = ?", id).one()
        generation = str(row["generation_id"])
        claimed = claim_attempt(sql, CALLS, id, generation, seen, now_ms() + due_by_offset)
        return [claimed, is_exhausted(sql, CALLS, id, generation, 1)]

    async def suspect_claims(self, id: str, seen: int, due_by_offset: int) -> list[Any]:
        """`claims`, for a row an interrupted attempt left (`claim_suspect`)."""
        sql = self.ctx.storage.sql
        row = sql.exec("SELECT generation_id FROM durability_calls WHERE id = ?", id).one()
        generation = str(row["generation_id"])
        claimed = claim_suspect(sql, CALLS, id, generation, seen, now_ms() + due_by_offset)
        return [claimed, is_exhausted(sql, CALLS, id, generation, 1)]

    async def many_transactions(self, count: int) -> list[str]:
        """`count` transactions in one turn, each with a nested one that rolls back."""
        storage = self.ctx.storage
        storage.sql.exec("CREATE TABLE IF NOT EXISTS kept (id TEXT PRIMARY KEY)")

        def nested_failure(number: int) -> None:
            storage.sql.exec("INSERT INTO kept (id) VALUES (?)", f"undone-{number}")
            raise LookupError(number)

        def write(number: int) -> None:
            storage.sql.exec("INSERT INTO kept (id) VALUES (?)", f"kept-{number}")
            with contextlib.suppress(LookupError):
                storage.transaction_sync(lambda: nested_failure(number))

        for number in range(count):
            storage.transaction_sync(functools.partial(write, number))
        return [row["id"] for row in storage.sql.exec("SELECT id FROM kept ORDER BY id")]

    async def alarm(self, info: Any = None) -> None:
        await self.durability.alarm(info)


async def lab(clock: VirtualClock, **options: Any) -> tuple[Runtime, Any]:
    rt = Runtime(bindings={"LAB": Lab, "OPTIONS": options}, clock=clock)
    await rt.start()
    return rt, rt.env.LAB.get_by_name("lab")


@pytest.mark.parametrize("seed_offset", [None, -3_000])
@pytest.mark.parametrize("alarm_offset", [None, -4_000, -2_000, 0, 2_000, 5_000, 9_000])
async def test_registration_reconcile_matches_the_window_rule(
    seed_offset: int | None, alarm_offset: int | None
) -> None:
    """A registration arms max(earliest, now + min delay) unless the alarm is in the window."""
    clock = VirtualClock(start_ms=START_MS)
    rt, obj = await lab(clock, alarm_concurrency=1)
    try:
        await obj.register("hold")
        if seed_offset is not None:
            await obj.seed("seeded", START_MS + seed_offset)
        current = None if alarm_offset is None else START_MS + alarm_offset
        stored = await obj.arm_and_register(current, "new")
        earliest = START_MS + min(0, seed_offset or 0)
        target = max(earliest, START_MS + MIN_DELAY)
        inside = current is not None and earliest <= current <= target
        assert stored == (current if inside else target)
    finally:
        await rt.close()


async def test_timer_passes_wait_for_a_pass_still_taking_rows() -> None:
    """Timer passes fired while a pass still has rows to take are deferred; all run once."""
    clock = VirtualClock(start_ms=START_MS)
    rt, obj = await lab(clock, alarm_concurrency=2)
    try:
        ids = [f"op-{number:02d}" for number in range(20)]
        await asyncio.gather(*(obj.register(id) for id in ids[:10]))
        await clock.run_until_idle()
        for id in ids[10:]:
            await obj.register(id)
            await clock.run_until_idle()
        await obj.release()
        await clock.run_until_idle()
        observed = await obj.observed()
        assert observed["calls"] == [[id, 1] for id in ids]
        assert observed["passes"] <= 4
    finally:
        await rt.close()


async def test_claim_takes_only_a_due_row_with_the_attempts_it_was_read_with() -> None:
    """A claim loses when the row is not due yet or its attempt changed since it was read;
    a row claimed and never settled is claimed again only as a suspect (to run alone)."""
    clock = VirtualClock(start_ms=START_MS)
    rt, obj = await lab(clock)
    try:
        await obj.seed("later", START_MS + 1_000)
        assert await obj.claims("later", 0, 0) == [None, False]
        assert await obj.claims("later", 0, 1_000) == [1, True]
        assert await obj.claims("later", 0, 1_000) == [None, True]
        assert await obj.claims("later", 1, 1_000) == [None, True]
        assert await obj.suspect_claims("later", 0, 1_000) == [None, True]
        assert await obj.suspect_claims("later", 1, 1_000) == [2, True]
    finally:
        await rt.close()


async def test_many_savepoints_in_one_turn_keep_exactly_their_writes() -> None:
    """Savepoints reused by depth: sequential and nested rollbacks keep the right rows."""
    clock = VirtualClock(start_ms=START_MS)
    rt, obj = await lab(clock)
    try:
        kept = await obj.many_transactions(40)
        assert kept == sorted(f"kept-{number}" for number in range(40))
    finally:
        await rt.close()


async def test_a_handler_whose_task_is_cancelled_fails_the_attempt_and_is_retried() -> None:
    """A cancelled handler task ends its attempt as a failure; the retry then completes."""
    clock = VirtualClock(start_ms=START_MS)
    rt, obj = await lab(clock)
    try:
        await obj.release()
        await obj.register("cancel-self")
        await clock.advance(60_000)
        assert await obj.status("cancel-self") == ["completed", 2, 2]
        observed = await obj.observed()
        assert observed["calls"] == [["cancel-self", 1], ["cancel-self", 2]]
    finally:
        await rt.close()


def _fast_call(
    id: str, operation: str, payload: Any, attempt: int, signal: AbortSignal, prefix: str
) -> DurableCall[Any]:
    """The `DurableCall` the operations' executor hands a handler of `operation` for
    attempt `attempt` of call `id` (its idempotency key `prefix` + `id`)."""
    received: list[DurableCall[Any]] = []
    owner = SimpleNamespace(_handlers={operation: received.append}, _prefixes={operation: prefix})
    kind = SimpleNamespace(name=operation)
    record = SimpleNamespace(key=id, data=serialize(payload))
    invoke = CallExecutor(owner).invoker(kind)  # type: ignore[arg-type]
    invoke(record, attempt, signal)  # type: ignore[arg-type]
    (call,) = received
    return call


def test_the_fast_durable_call_equals_the_constructed_one() -> None:
    """A handler's `DurableCall` is built without its constructor: it has every field,
    equals and hashes as the constructed one, and stays frozen."""
    signal = AbortSignal()
    fast = _fast_call("id-1", "charge", {"cents": 5}, 2, signal, "key-")
    built = DurableCall(
        id="id-1",
        operation="charge",
        payload={"cents": 5},
        attempt=2,
        signal=signal,
        idempotency_key="key-id-1",
    )
    assert [field.name for field in dataclasses.fields(DurableCall)] == list(vars(fast))
    assert fast == built and repr(fast) == repr(built)
    assert hash(_fast_call("id-1", "charge", None, 2, signal, "k:")) == hash(
        DurableCall(
            id="id-1",
            operation="charge",
            payload=None,
            attempt=2,
            signal=signal,
            idempotency_key="k:id-1",
        )
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.attempt = 3  # type: ignore[misc]


def test_an_event_built_with_its_fields_equals_the_constructed_one() -> None:
    """`frozen_with` makes an event without its dataclass constructor: it equals, hashes
    and prints as the constructed one, has the same `__dict__` (what `vars` shows), its
    `type` and `asdict`, and stays frozen."""
    constructed = AttemptSettledEvent(
        entity_kind="operation",
        operation="charge",
        id="id-1",
        generation="g-1",
        timestamp=10,
        attempt=2,
        outcome="failed",
        duration_ms=3,
        error="a stored error",  # type: ignore[arg-type]  # hashable: the hashes compare
        next_attempt_at=50,
        result=7,
    )
    fields = dataclasses.fields(AttemptSettledEvent)
    state = {item.name: getattr(constructed, item.name) for item in fields if item.init}
    fast = frozen_with(AttemptSettledEvent, state)
    assert fast == constructed and repr(fast) == repr(constructed)
    assert hash(fast) == hash(constructed)
    assert vars(fast) == vars(constructed) and fast.type == "attempt_settled"
    assert dataclasses.asdict(fast) == dataclasses.asdict(constructed)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.attempt = 3  # type: ignore[misc]


async def test_completed_attempts_emit_the_events_the_constructor_builds(
    make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """The completed events an operation and a named alarm emit are the ones
    `AttemptSettledEvent(...)` builds from their fields by keyword."""
    events: list[Any] = []

    class Settled(DurableObject):
        def __init__(self, ctx: Any, env: Any) -> None:
            super().__init__(ctx, env)
            self.durability = Durability(
                context=ctx,
                handlers={"charge": self._charge},
                on_lifecycle_event=events.append,
                include_result_in_events=True,
            )
            self.alarms = DurabilityAlarms(
                context=ctx, handlers={"renew": self._renew}, on_lifecycle_event=events.append
            )

        def _charge(self, call: DurableCall[Any]) -> Any:
            return f"paid {call.payload}"

        def _renew(self, info: DurableAlarmInfo) -> None:
            return None

        async def go(self) -> None:
            await self.durability.charge("c-1", 5)
            await self.alarms.renew(now_ms() + 1_000)

        async def alarm(self, info: Any = None) -> None:
            await self.durability.alarm(info)

    async with make_runtime(bindings={"S": Settled}) as rt:
        await rt.env.S.get_by_name("s").go()
        await clock.advance(2_000)
    settled = [event for event in events if event.type == "attempt_settled"]
    assert len(settled) == 2
    for event in settled:
        rebuilt = AttemptSettledEvent(
            entity_kind=event.entity_kind,
            operation=event.operation,
            alarm=event.alarm,
            id=event.id,
            generation=event.generation,
            timestamp=event.timestamp,
            attempt=event.attempt,
            outcome=event.outcome,
            duration_ms=event.duration_ms,
            result=event.result,
        )
        assert event == rebuilt and repr(event) == repr(rebuilt) and hash(event) == hash(rebuilt)
        assert vars(event) == vars(rebuilt)
    assert [(e.entity_kind, e.operation, e.alarm, e.result) for e in settled] == [
        ("operation", "charge", None, "paid 5"),
        ("named_alarm", None, "renew", None),
    ]
