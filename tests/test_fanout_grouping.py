"""Enqueues grouped per turn: each caller gets its own outcome, and only its own."""

from __future__ import annotations

import asyncio

from _fanout_host import FanoutProbe, hub


async def _never(messages: object) -> None:
    await asyncio.Event().wait()


async def test_a_rejection_of_one_enqueue_reaches_its_caller_only() -> None:
    """A key clash one enqueue meets in storage fails that enqueue; the others of its
    turn commit."""
    probe = FanoutProbe(consumers={"email": {}})
    async with hub(probe) as t:
        probe.behaviour["email"] = _never
        first, bad, third = await asyncio.gather(
            t.obj.enqueue([{"id": "m1", "body": 1}]),
            t.obj.enqueue([{"id": "m1", "body": 2}]),
            t.obj.enqueue([{"id": "m3", "body": 3}]),
        )
        assert bad["success"] is False
        assert bad["error"][0] == "FanoutEnqueueError"
        assert (first["success"], third["success"]) == (True, True)
        assert [row["id"] for row in await t.obj.manifests()] == ["m1", "m3"]
        assert await t.obj.pending() == 2
