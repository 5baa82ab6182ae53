"""Fanout settlement: ack, retry, dead letter, ack_on_return, storage targets, timeouts."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from _fanout_host import FanoutProbe, bodies, hub, settle_nothing
from conftest import START_MS
from durability import (
    FanoutMessage,
    FanoutSettlementError,
    RetryPolicy,
    SerializedError,
    StoredFailure,
)

FIXED = RetryPolicy(delay=lambda attempt: 1_000)


async def test_first_settlement_binds_and_a_second_raises() -> None:
    """After ack(), retry() raises FanoutSettlementError naming the bound outcome."""
    probe = FanoutProbe(consumers={"email": {}})
    seen: list[str] = []

    async def twice(messages: Sequence[FanoutMessage[Any]]) -> None:
        [message] = messages
        await message.ack()
        try:
            await message.retry()
        except FanoutSettlementError as error:
            seen.append(str(error))

    probe.behaviour["email"] = twice
    async with hub(probe) as t:
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        assert seen == ['Fanout delivery "m1" was already settled as "ack"']
        assert await t.obj.rows() == []


async def test_settlement_after_the_batch_ended_raises() -> None:
    """A message kept past its batch cannot be settled: it was already retried."""
    probe = FanoutProbe(consumers={"email": {}}, options={"retries": FIXED})
    probe.behaviour["email"] = settle_nothing
    async with hub(probe) as t:
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        stale = 'Fanout delivery "m1" was already settled as "retry"'
        with pytest.raises(FanoutSettlementError, match=stale):
            await probe.received[0].ack()


async def test_unsettled_message_is_retried_with_the_policy_delay() -> None:
    """Returning without settling schedules a retry with the 'not settled' error."""
    probe = FanoutProbe(consumers={"email": {}}, options={"retries": FIXED})
    probe.behaviour["email"] = settle_nothing
    async with hub(probe) as t:
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        [row] = await t.obj.rows()
        assert (row["attempt"], row["next_attempt_at"]) == (1, START_MS + 1_000)
        assert (row["last_error_name"], row["last_error"]) == (
            "Error",
            "Consumer returned without settling the message",
        )
        [settled] = probe.of_type("attempt_settled")
        assert settled.outcome == "retry_scheduled"
        assert settled.next_attempt_at == START_MS + 1_000
        assert settled.error == SerializedError(
            "Error", "Consumer returned without settling the message"
        )


async def test_consumer_error_is_stored_and_started_settlements_still_complete() -> None:
    """A raising consumer: the ack it started is awaited, the other message is retried."""
    probe = FanoutProbe(consumers={"email": {}}, options={"retries": FIXED})
    started: list[asyncio.Future[None]] = []

    async def ack_first_then_raise(messages: Sequence[FanoutMessage[Any]]) -> None:
        started.append(asyncio.ensure_future(messages[0].ack()))
        await asyncio.sleep(0)
        raise RuntimeError("smtp down")

    probe.behaviour["email"] = ack_first_then_raise
    async with hub(probe) as t:
        await t.obj.enqueue(bodies("x", "y"))
        await t.clock.run_until_idle()
        [row] = await t.obj.rows()
        assert row["id"] == '["m2","email"]'
        assert (row["last_error_name"], row["last_error"]) == ("RuntimeError", "smtp down")
        completed = [e for e in probe.of_type("attempt_settled") if e.outcome == "completed"]
        assert [e.id for e in completed] == ["m1"]


async def test_retry_delay_overrides_the_policy() -> None:
    """retry(delay_ms) makes the delivery due exactly that much later."""
    probe = FanoutProbe(consumers={"email": {}})

    async def later(messages: Sequence[FanoutMessage[Any]]) -> None:
        if messages[0].attempt == 1:
            await messages[0].retry(7_000)
        else:
            await messages[0].ack()

    probe.behaviour["email"] = later
    async with hub(probe) as t:
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        [row] = await t.obj.rows()
        assert row["next_attempt_at"] == START_MS + 7_000
        assert (row["last_error_name"], row["last_error"]) == ("Retry", "Retried by consumer")
        await t.clock.advance(7_000)
        assert probe.delivered("email") == [("m1", 1), ("m1", 2)]
        assert await t.obj.rows() == []


async def test_unseen_messages_are_delivered_before_due_retries() -> None:
    """retry(0) is due at once, yet a message never delivered goes first."""
    probe = FanoutProbe(consumers={"email": {}})

    async def retry_m1_once(messages: Sequence[FanoutMessage[Any]]) -> None:
        for message in messages:
            if message.id == "m1" and message.attempt == 1:
                await message.retry(0)
            else:
                await message.ack()

    probe.behaviour["email"] = retry_m1_once
    async with hub(probe, max_batch_size=1) as t:
        await t.obj.enqueue(bodies("x", "y", "z"))
        await t.clock.run_until_idle()
        assert probe.delivered("email") == [("m1", 1), ("m2", 1), ("m3", 1), ("m1", 2)]


async def test_invalid_retry_delay_raises_without_binding_an_outcome() -> None:
    """retry(-1) raises ValueError; the message can still be acked."""
    probe = FanoutProbe(consumers={"email": {}})
    errors: list[str] = []

    async def bad_then_ack(messages: Sequence[FanoutMessage[Any]]) -> None:
        for delay in (-1, 1.5, 2**53):
            try:
                await messages[0].retry(delay)  # type: ignore[arg-type]
            except ValueError as error:
                errors.append(str(error))
        await messages[0].ack()

    probe.behaviour["email"] = bad_then_ack
    async with hub(probe) as t:
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        assert errors == ["delay_ms must produce a non-negative safe-integer timestamp"] * 3
        assert await t.obj.rows() == []


async def test_ack_on_return_acks_what_the_consumer_left_unsettled() -> None:
    """With ack_on_return, a returning consumer's unsettled messages are acked; retry() holds."""
    probe = FanoutProbe(consumers={"email": {"ack_on_return": True}}, options={"retries": FIXED})

    async def retry_second(messages: Sequence[FanoutMessage[Any]]) -> None:
        await messages[1].retry()

    probe.behaviour["email"] = retry_second
    async with hub(probe) as t:
        await t.obj.enqueue(bodies("x", "y", "z"))
        await t.clock.run_until_idle()
        assert [row["id"] for row in await t.obj.rows()] == ['["m2","email"]']
        completed = [e.id for e in probe.of_type("attempt_settled") if e.outcome == "completed"]
        assert sorted(completed) == ["m1", "m3"]


async def test_ack_on_return_does_not_ack_when_the_consumer_raises() -> None:
    """A raising consumer with ack_on_return gets every message retried."""
    probe = FanoutProbe(consumers={"email": {"ack_on_return": True}}, options={"retries": FIXED})

    async def boom(messages: Sequence[FanoutMessage[Any]]) -> None:
        raise RuntimeError("boom")

    probe.behaviour["email"] = boom
    async with hub(probe) as t:
        await t.obj.enqueue(bodies("x", "y"))
        await t.clock.run_until_idle()
        assert [row["attempt"] for row in await t.obj.rows()] == [1, 1]


async def test_batch_timeout_retries_with_fanout_timeout_error() -> None:
    """A consumer that hangs past attempt_timeout_ms fails the batch with FanoutTimeoutError."""
    probe = FanoutProbe(
        consumers={"email": {"attempt_timeout_ms": 5_000}}, options={"retries": FIXED}
    )

    async def hang(messages: Sequence[FanoutMessage[Any]]) -> None:
        await asyncio.Event().wait()

    probe.behaviour["email"] = hang
    async with hub(probe) as t:
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        [claimed] = await t.obj.rows()
        assert claimed["next_attempt_at"] == START_MS + 5_000
        await t.clock.advance(5_000)
        [row] = await t.obj.rows()
        assert (row["last_error_name"], row["last_error"]) == (
            "FanoutTimeoutError",
            "Fanout delivery timed out after 5000ms",
        )
        assert row["next_attempt_at"] == START_MS + 6_000
        with pytest.raises(FanoutSettlementError):
            await probe.received[0].ack()


async def test_storage_target_writes_each_message_and_acks_it() -> None:
    """A storage target gets a StoredMessage per message (no failure); rows are removed."""
    probe = FanoutProbe(consumers={}, storage={"archive": {}})
    async with hub(probe) as t:
        await t.obj.enqueue(bodies({"n": 1}))
        await t.clock.run_until_idle()
        [stored] = probe.written["archive"]
        generation = probe.of_type("registered")[0].generation
        assert stored.id == f'["{generation}","archive"]'
        assert (stored.message_id, stored.target, stored.body) == ("m1", "archive", {"n": 1})
        assert (stored.enqueued_at, stored.stored_at, stored.attempts) == (START_MS, START_MS, 1)
        assert stored.failure is None
        assert await t.obj.rows() == []


async def test_failed_storage_write_is_retried() -> None:
    """A raising write fails the batch for that message; the next attempt writes it."""
    probe = FanoutProbe(consumers={}, storage={"archive": {}}, options={"retries": FIXED})
    probe.write_failures = 1
    async with hub(probe) as t:
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        [row] = await t.obj.rows()
        assert (row["last_error_name"], row["last_error"]) == ("OSError", "disk full")
        await t.clock.advance(1_000)
        assert [m.attempts for m in probe.written["archive"]] == [2]


async def test_exhausted_delivery_goes_to_the_dlq_with_its_last_error() -> None:
    """After max_attempts failures the DLQ gets it (reason exhausted) and the row is removed."""
    policy = RetryPolicy(max_attempts=2, delay=lambda attempt: 1_000)
    probe = FanoutProbe(consumers={"email": {}}, use_dlq=True, options={"retries": policy})

    async def boom(messages: Sequence[FanoutMessage[Any]]) -> None:
        raise RuntimeError("bounced")

    probe.behaviour["email"] = boom
    async with hub(probe) as t:
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        await t.clock.advance(1_000)
        [dead] = probe.dead
        assert dead.attempts == 2
        assert dead.stored_at == START_MS + 1_000
        assert dead.failure == StoredFailure(
            reason="exhausted", error=SerializedError("RuntimeError", "bounced")
        )
        assert await t.obj.rows() == []
        [terminal] = probe.of_type("terminal")
        assert (terminal.reason, terminal.attempt) == ("attempts_exhausted", 2)
        assert terminal.error == SerializedError("RuntimeError", "bounced")


async def test_explicit_dead_letter_has_no_error() -> None:
    """dead_letter() on a first attempt writes failure (explicit, None); terminal says so."""
    probe = FanoutProbe(consumers={"email": {}}, use_dlq=True)

    async def reject(messages: Sequence[FanoutMessage[Any]]) -> None:
        await messages[0].dead_letter()

    probe.behaviour["email"] = reject
    async with hub(probe) as t:
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        [dead] = probe.dead
        assert dead.failure == StoredFailure(reason="explicit", error=None)
        [terminal] = probe.of_type("terminal")
        assert terminal.reason == "dead_lettered"
        assert terminal.error == SerializedError("DeadLetter", "Dead-lettered by consumer")


async def test_without_dlq_a_dead_letter_is_dropped() -> None:
    """No DLQ: the dead-lettered delivery is removed at once and reported as terminal."""
    probe = FanoutProbe(consumers={"email": {}})

    async def reject(messages: Sequence[FanoutMessage[Any]]) -> None:
        await messages[0].dead_letter()

    probe.behaviour["email"] = reject
    async with hub(probe) as t:
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        assert await t.obj.rows() == []
        assert await t.obj.manifests() == []
        assert len(probe.of_type("terminal")) == 1
        assert await t.obj.alarm_at() is None


async def test_dlq_failure_keeps_the_intent_and_retries_only_the_write_every_minute() -> None:
    """A failing DLQ write leaves the row in dead_letter phase; 60 s later only the write reruns."""
    probe = FanoutProbe(consumers={"email": {}}, use_dlq=True)
    probe.dlq_failures = 1

    async def reject(messages: Sequence[FanoutMessage[Any]]) -> None:
        await messages[0].dead_letter()

    probe.behaviour["email"] = reject
    async with hub(probe) as t:
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        [row] = await t.obj.rows()
        assert (row["phase"], row["dead_letter_reason"]) == ("dead_letter", "explicit")
        assert row["next_attempt_at"] == START_MS + 60_000
        await t.clock.advance(60_000)
        [dead] = probe.dead
        assert dead.stored_at == START_MS
        assert probe.delivered("email") == [("m1", 1)]
        assert await t.obj.rows() == []


async def test_hanging_dlq_write_times_out_after_a_minute() -> None:
    """A DLQ write that never returns is abandoned after 60 s and retried later."""
    probe = FanoutProbe(consumers={"email": {}}, use_dlq=True)
    probe.dlq_hang = True

    async def reject(messages: Sequence[FanoutMessage[Any]]) -> None:
        await messages[0].dead_letter()

    probe.behaviour["email"] = reject
    async with hub(probe) as t:
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        await t.clock.advance(60_000)
        probe.dlq_hang = False
        await t.clock.advance(60_000)
        assert len(probe.dead) == 1
        assert await t.obj.rows() == []


async def test_a_dlq_write_cut_off_every_time_is_bounded_then_the_message_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A DLQ write that never finishes because the object is evicted each time (as a
    write that takes its process down) is retried alone, and once as many writes run
    alone were cut off as the target has attempts, the message is dropped, reported
    once, instead of being retried forever."""
    probe = FanoutProbe(
        consumers={"email": {"retries": RetryPolicy(max_attempts=2)}},
        use_dlq=True,
    )
    probe.dlq_hang = True

    async def reject(messages: Sequence[FanoutMessage[Any]]) -> None:
        await messages[0].dead_letter()

    probe.behaviour["email"] = reject
    async with hub(probe) as t:
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        for _ in range(2):  # the first cut off beside others, then one alone
            await t.rt.evict(t.obj)
            await t.clock.advance(60_000)
            assert len(await t.obj.rows()) == 1
        await t.rt.evict(t.obj)
        await t.clock.advance(60_000)
        assert await t.obj.rows() == []
        assert probe.dead == []
        assert probe.delivered("email") == [("m1", 1)]
    [dropped] = [
        r
        for r in caplog.records
        if getattr(r, "event", "") == "durability.fanout.dead_letter_dropped"
    ]
    assert "interrupted 3 times" in dropped.getMessage()


async def test_lifecycle_events_follow_one_delivery() -> None:
    """registered (attempt 0), attempt_started, attempt_settled completed, per target."""
    probe = FanoutProbe(consumers={"email": {}})
    async with hub(probe) as t:
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        assert [e.type for e in probe.events] == [
            "registered",
            "attempt_started",
            "attempt_settled",
        ]
        registered, started, settled = probe.events
        assert {e.entity_kind for e in probe.events} == {"fanout_delivery"}
        assert (registered.id, registered.target, registered.attempt) == ("m1", "email", 0)
        assert registered.timestamp == START_MS
        assert (started.attempt, settled.attempt, settled.outcome) == (1, 1, "completed")
        assert settled.duration_ms == 0
        assert len({e.generation for e in probe.events}) == 1


async def test_lifecycle_events_names_the_types_built() -> None:
    """With `lifecycle_events`, the hook gets only the types named: each emitting path
    (enqueue, delivery, completion, retry, dead-lettering) builds its event only when
    its type is named."""
    probe = FanoutProbe(consumers={"email": {}})
    async with hub(probe, lifecycle_events=["registered", "attempt_started"]) as t:
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        assert [e.type for e in probe.events] == ["registered", "attempt_started"]
    probe = FanoutProbe(consumers={"email": {}})
    async with hub(probe, lifecycle_events=("attempt_settled",)) as t:
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        assert [(e.type, e.outcome) for e in probe.events] == [("attempt_settled", "completed")]
    probe = FanoutProbe(consumers={"email": {"retries": RetryPolicy(max_attempts=1)}})
    probe.behaviour["email"] = settle_nothing
    async with hub(probe, lifecycle_events={"terminal"}) as t:
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        assert [(e.type, e.reason) for e in probe.events] == [("terminal", "attempts_exhausted")]
    for attempts in (1, 2):  # a dead letter, then a retry, neither of them listened to
        probe = FanoutProbe(consumers={"email": {"retries": RetryPolicy(max_attempts=attempts)}})
        probe.behaviour["email"] = settle_nothing
        async with hub(probe, lifecycle_events=["attempt_started"]) as t:
            await t.obj.enqueue(bodies("x"))
            await t.clock.run_until_idle()
            assert [e.type for e in probe.events] == ["attempt_started"]


async def test_redrive_of_a_dead_letter_registers_fresh_attempts() -> None:
    """Enqueueing a dead letter by its delivery id for its target starts again at attempt 1."""
    probe = FanoutProbe(use_dlq=True)
    redriven = False

    async def reject_first(messages: Sequence[FanoutMessage[Any]]) -> None:
        for message in messages:
            if redriven:
                await message.ack()
            else:
                await message.dead_letter()

    async def hold(messages: Sequence[FanoutMessage[Any]]) -> None:
        await asyncio.Event().wait()

    probe.behaviour["email"] = reject_first
    probe.behaviour["audit"] = hold
    async with hub(probe) as t:
        await t.obj.enqueue(bodies({"n": 1}))
        await t.clock.run_until_idle()
        [dead] = probe.dead
        redriven = True
        entry = {"id": dead.message_id, "body": dead.body, "key": dead.id}
        result = await t.obj.enqueue([entry], [dead.target])
        await t.clock.run_until_idle()
        assert result["success"] is True
        assert probe.delivered("email") == [("m1", 1), ("m1", 1)]
        assert [row["target_id"] for row in await t.obj.rows()] == ["audit"]


async def test_acks_wrapped_in_tasks_the_consumer_does_not_await_still_count() -> None:
    """A consumer that starts each ack as a task and returns at once: every message is
    acked by its task, none is retried."""
    probe = FanoutProbe(consumers={"email": {}})
    acks: list[asyncio.Future[None]] = []

    async def ack_in_tasks(messages: Sequence[FanoutMessage[Any]]) -> None:
        acks.extend(asyncio.ensure_future(message.ack()) for message in messages)

    probe.behaviour["email"] = ack_in_tasks
    async with hub(probe) as t:
        await t.obj.enqueue(bodies("x", "y"))
        await t.clock.run_until_idle()
        assert probe.delivered("email") == [("m1", 1), ("m2", 1)]
        assert [ack.exception() for ack in acks] == [None, None]
        assert await t.obj.rows() == []
