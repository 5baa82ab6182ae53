"""DurabilityFanout: enqueue, deduplication, validation, delivery order, batches, load."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from _fanout_host import FanoutProbe, bodies, hub
from conftest import START_MS, MakeRuntime
from durability import (
    DurabilityFanout,
    FanoutTarget,
    RetryPolicy,
    SerializedError,
    StoredFailure,
    StoredMessage,
)
from durability.runtime import DurableObject


async def test_each_target_gets_each_message_and_settled_messages_are_deleted() -> None:
    """Every target receives every message; once all acked, no row or manifest is left."""
    probe = FanoutProbe()
    async with hub(probe) as t:
        result = await t.obj.enqueue(bodies("x", "y"))
        assert result["success"] is True
        assert result["value"] == ["m1", "m2"]
        await t.clock.run_until_idle()
        assert probe.delivered("email") == [("m1", 1), ("m2", 1)]
        assert probe.delivered("audit") == [("m1", 1), ("m2", 1)]
        assert await t.obj.rows() == []
        assert await t.obj.manifests() == []
        assert await t.obj.pending() == 0


async def test_message_stays_until_every_target_settled_it() -> None:
    """A target that retries keeps the manifest alive with one remaining delivery."""
    probe = FanoutProbe(options={"retries": RetryPolicy(delay=lambda attempt: 5_000)})

    async def retry(messages: Any) -> None:
        for message in messages:
            await message.retry()

    probe.behaviour["audit"] = retry
    async with hub(probe) as t:
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        [manifest] = await t.obj.manifests()
        assert manifest["remaining"] == 1
        [row] = await t.obj.rows()
        assert (row["target_id"], row["attempt"], row["next_attempt_at"]) == (
            "audit",
            1,
            START_MS + 5_000,
        )
        probe.behaviour.pop("audit")
        await t.clock.advance(5_000)
        assert probe.delivered("audit") == [("m1", 1), ("m1", 2)]
        assert await t.obj.manifests() == []


async def test_duplicate_enqueue_is_skipped_and_its_id_returned() -> None:
    """The same key, id, body and targets again: no new rows, acked targets not redelivered."""
    probe = FanoutProbe()
    async with hub(probe) as t:
        probe.behaviour["audit"] = lambda messages: _never()
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        again = await t.obj.enqueue([*bodies("x"), {"id": "m9", "body": 9}])
        await t.clock.run_until_idle()
        assert again["success"] is True
        assert again["value"] == ["m1", "m9"]
        assert probe.delivered("email") == [("m1", 1), ("m9", 1)]


async def _never() -> None:
    """A consumer that parks forever (until its batch times out)."""
    await asyncio.Event().wait()


async def test_key_reused_for_different_work_rejects_the_whole_batch() -> None:
    """A key bound to another body fails the batch as success=False and writes nothing."""
    probe = FanoutProbe(consumers={"email": {}})
    async with hub(probe) as t:
        probe.behaviour["email"] = lambda messages: _never()
        await t.obj.enqueue([{"id": "m1", "body": 1, "key": "k"}])
        await t.clock.run_until_idle()
        before = await t.obj.manifests()
        result = await t.obj.enqueue([{"id": "m2", "body": 2}, {"id": "m1", "body": 5, "key": "k"}])
        assert result["success"] is False
        assert result["error"] == [
            "FanoutEnqueueError",
            'Deduplication key "k" already identifies different work',
        ]
        assert result["value"] is None
        assert await t.obj.manifests() == before


async def test_concurrent_enqueues_are_atomic_each_and_keep_their_order() -> None:
    """Enqueues stored together in one turn: a rejected one stores nothing, the rest do."""
    probe = FanoutProbe(consumers={"email": {}})
    async with hub(probe) as t:
        probe.behaviour["email"] = lambda messages: _never()
        first, clash, third = await asyncio.gather(
            t.obj.enqueue([{"id": "m1", "body": 1, "key": "k"}, {"id": "m2", "body": 2}]),
            t.obj.enqueue([{"id": "m3", "body": 3}, {"id": "m4", "body": 4, "key": "k"}]),
            t.obj.enqueue([{"id": "m5", "body": 5}, {"id": "m2", "body": 2}]),
        )
        assert (first["success"], first["value"]) == (True, ["m1", "m2"])
        assert clash["success"] is False
        assert clash["error"][0] == "FanoutEnqueueError"
        assert (third["success"], third["value"]) == (True, ["m5", "m2"])
        assert [row["id"] for row in await t.obj.manifests()] == ["m1", "m2", "m5"]
        assert await t.obj.pending() == 3


async def test_repeat_within_one_batch_is_registered_once() -> None:
    """The second use of a key in one batch is a duplicate of the first."""
    probe = FanoutProbe(consumers={"email": {}})
    async with hub(probe) as t:
        result = await t.obj.enqueue([{"id": "m1", "body": 1}, {"id": "m1", "body": 1}])
        await t.clock.run_until_idle()
        assert result["value"] == ["m1", "m1"]
        assert probe.delivered("email") == [("m1", 1)]


async def test_settled_key_can_be_enqueued_again() -> None:
    """Once every target settled a message its key is free: the same id is new work."""
    probe = FanoutProbe(consumers={"email": {}})
    async with hub(probe) as t:
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        await t.obj.enqueue(bodies("x"))
        await t.clock.run_until_idle()
        assert probe.delivered("email") == [("m1", 1), ("m1", 1)]


@pytest.mark.parametrize(
    ("targets", "message"),
    [
        ([], "Enqueue targets must be distinct configured target IDs"),
        (["email", "email"], "Enqueue targets must be distinct configured target IDs"),
        (["sms"], "Enqueue targets must be distinct configured target IDs"),
    ],
)
async def test_bad_targets_are_a_definite_rejection(targets: list[str], message: str) -> None:
    """Empty, repeated or unknown target ids: success=False with FanoutEnqueueError."""
    probe = FanoutProbe()
    async with hub(probe) as t:
        result = await t.obj.enqueue(bodies("x"), targets)
        assert result["success"] is False
        assert result["error"] == ["FanoutEnqueueError", message]
        assert result["inbound"] == 1
        assert await t.obj.manifests() == []


async def test_empty_ids_and_non_json_bodies_are_definite_rejections() -> None:
    """An empty id or key, or a body that is not JSON, returns success=False and stores nothing."""
    probe = FanoutProbe()
    async with hub(probe) as t:
        empty = await t.obj.enqueue([{"id": "", "body": 1}])
        empty_key = await t.obj.enqueue([{"id": "m1", "body": 1, "key": ""}])
        assert empty["error"] == [
            "FanoutEnqueueError",
            "Message IDs and deduplication keys must be non-empty strings",
        ]
        assert empty_key["error"] == empty["error"]
        assert await t.obj.enqueue_unserializable() == "TypeError"
        assert await t.obj.manifests() == []


async def test_empty_batch_succeeds_with_no_ids() -> None:
    """Enqueueing nothing is valid and returns an empty list."""
    probe = FanoutProbe()
    async with hub(probe) as t:
        assert (await t.obj.enqueue([]))["value"] == []


async def test_targets_option_limits_a_message_to_those_targets() -> None:
    """`targets=["audit"]` registers one delivery (the redrive shape)."""
    probe = FanoutProbe()
    async with hub(probe) as t:
        result = await t.obj.enqueue(bodies("x"), ["audit"])
        await t.clock.run_until_idle()
        assert result["pending"] == 1
        assert probe.delivered("audit") == [("m1", 1)]
        assert probe.delivered("email") == []


async def test_default_id_is_a_uuid_and_key_defaults_to_it() -> None:
    """Without an id the message gets a random UUID, which is also its deduplication key."""
    probe = FanoutProbe(consumers={"email": {}})
    async with hub(probe) as t:
        probe.behaviour["email"] = lambda messages: _never()
        result = await t.obj.enqueue([{"body": 1}])
        [generated] = result["value"]
        assert len(generated) == 36 and generated[14] == "4"
        assert [m["key"] for m in await t.obj.manifests()] == [generated]


async def test_batches_are_bounded_and_first_deliveries_follow_enqueue_order() -> None:
    """max_batch_size caps each batch; messages arrive in sequence order."""
    probe = FanoutProbe(consumers={"email": {}})
    async with hub(probe, max_batch_size=2) as t:
        await t.obj.enqueue(bodies(*range(5)))
        await t.clock.run_until_idle()
        email = [batch for name, batch in probe.batches if name == "email"]
        assert [len(batch) for batch in email] == [2, 2, 1]
        assert [id for batch in email for id, _, _ in batch] == ["m1", "m2", "m3", "m4", "m5"]


async def test_batch_delay_holds_first_deliveries_until_the_window_boundary() -> None:
    """With batch_delay_ms, messages of one window are due together at its end."""
    probe = FanoutProbe(consumers={"email": {}})
    async with hub(probe, batch_delay_ms=10_000) as t:
        await t.clock.advance(1_000)
        await t.obj.enqueue(bodies("x"))
        await t.clock.advance(2_000)
        await t.obj.enqueue([{"id": "m2", "body": "y"}])
        boundary = -(-(START_MS + 3_000) // 10_000) * 10_000
        assert [row["next_attempt_at"] for row in await t.obj.rows()] == [boundary, boundary]
        await t.clock.advance_to(boundary - 1)
        assert probe.batches == []
        await t.clock.advance_to(boundary)
        assert [len(batch) for _, batch in probe.batches] == [2]


async def test_load_counts_stored_deliveries_and_enqueue_calls() -> None:
    """pending_deliveries is the number of delivery rows; the enqueue counts as completed."""
    probe = FanoutProbe()
    async with hub(probe) as t:
        probe.behaviour["email"] = lambda messages: _never()
        result = await t.obj.enqueue(bodies("x", "y"))
        assert result["pending"] == 4
        assert result["inbound"] == 1
        await t.clock.run_until_idle()
        assert await t.obj.pending() == 2


async def test_stored_message_json_uses_camel_case_keys_and_round_trips() -> None:
    """to_json() writes the stored shape; from_json() reads it back."""
    message = StoredMessage(
        id='["g","email"]',
        message_id="m1",
        target="email",
        body={"a": 1},
        enqueued_at=1,
        stored_at=2,
        attempts=3,
        failure=StoredFailure(reason="exhausted", error=SerializedError("Error", "boom")),
    )
    data = message.to_json()
    assert data["messageId"] == "m1"
    assert data["failure"] == {"reason": "exhausted", "error": {"name": "Error", "message": "boom"}}
    assert StoredMessage.from_json(data) == message


class _Bare(DurableObject):
    """An object whose tests build fanouts by hand."""

    async def build(self, kind: str) -> str:
        async def deliver(messages: Any) -> None:
            return None

        cases: dict[str, dict[str, Any]] = {
            "empty": {"targets": {}},
            "nameless": {"targets": {"": FanoutTarget(deliver=deliver)}},
            "neither": {"targets": {"a": FanoutTarget()}},
            "both": {"targets": {"a": FanoutTarget(deliver=deliver, storage=deliver)}},
            "negative_delay": {
                "targets": {"a": FanoutTarget(deliver=deliver)},
                "batch_delay_ms": -1,
            },
            "fractional_delay": {
                "targets": {"a": FanoutTarget(deliver=deliver)},
                "batch_delay_ms": 1.5,
            },
            "zero_batch": {"targets": {"a": FanoutTarget(deliver=deliver)}, "max_batch_size": 0},
            "target_timeout": {
                "targets": {"a": FanoutTarget(deliver=deliver, attempt_timeout_ms=0)}
            },
        }
        options = cases[kind]
        try:
            DurabilityFanout(context=self.ctx, **options)
        except (TypeError, ValueError) as error:
            return f"{type(error).__name__}: {error}"
        return "accepted"


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("empty", "TypeError: Fanout requires at least one static target"),
        ("nameless", 'TypeError: Invalid fanout target ""'),
        ("neither", 'TypeError: Invalid fanout target "a"'),
        ("both", 'TypeError: Invalid fanout target "a"'),
        ("negative_delay", "ValueError: batch_delay_ms must be a non-negative integer"),
        (
            "fractional_delay",
            "NotAnIntegerError: batch_delay_ms must be a non-negative integer, got float",
        ),
        ("zero_batch", "ValueError: max_batch_size must be a positive integer"),
        ("target_timeout", "ValueError: targets.a.attempt_timeout_ms must be a positive integer"),
    ],
)
async def test_invalid_options_raise_before_anything_is_stored(
    kind: str, expected: str, make_runtime: MakeRuntime
) -> None:
    """Bad targets and options raise at construction, naming the target or option."""
    async with make_runtime(bindings={"BARE": _Bare}) as rt:
        stub = rt.env.BARE.get_by_name("a")
        assert await stub.build(kind) == expected
