"""Enqueues grouped per turn: each caller gets its own outcome, and only its own."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import pytest

from _fanout_host import Probe, hub
from durability._fanout.grouping import TurnGroups


async def _never(messages: object) -> None:
    await asyncio.Event().wait()


def _spawn(work: Awaitable[None]) -> asyncio.Future[None]:
    return asyncio.ensure_future(work)


async def test_an_error_of_one_enqueue_reaches_its_caller_only() -> None:
    """A storage error one enqueue causes fails that enqueue; the others of its turn commit."""
    probe = Probe(consumers={"email": {}})
    async with hub(probe) as t:
        probe.behaviour["email"] = _never
        first, bad, third = await asyncio.gather(
            t.obj.enqueue([{"id": "m1", "body": 1}]),
            t.obj.enqueue([{"id": "m\ud800", "body": 2}]),
            t.obj.enqueue([{"id": "m3", "body": 3}]),
            return_exceptions=True,
        )
        assert isinstance(bad, UnicodeEncodeError)
        assert isinstance(first, dict) and isinstance(third, dict)
        assert (first["success"], third["success"]) == (True, True)
        assert [row["id"] for row in await t.obj.manifests()] == ["m1", "m3"]
        assert await t.obj.pending() == 2


async def test_each_caller_gets_the_outcome_handle_gave_its_request() -> None:
    """Results and per-request exceptions go to the caller of that request."""
    handled: list[list[int]] = []

    async def handle(requests: list[int]) -> list[int | Exception]:
        handled.append(requests)
        return [ValueError(n) if n < 0 else n * 10 for n in requests]

    groups: TurnGroups[int, int] = TurnGroups(handle, _spawn)
    outcomes = await asyncio.gather(*(groups.submit(n) for n in (1, -2, 3)), return_exceptions=True)
    assert outcomes[0] == 10 and outcomes[2] == 30
    assert isinstance(outcomes[1], ValueError) and outcomes[1].args == (-2,)
    assert handled == [[1, -2, 3]]
    assert await groups.submit(4) == 40
    assert handled == [[1, -2, 3], [4]]


async def test_a_failing_handle_fails_every_caller_of_its_group() -> None:
    """When `handle` itself raises, every caller of that group gets its error."""

    async def handle(requests: list[int]) -> list[int | Exception]:
        raise RuntimeError("storage down")

    groups: TurnGroups[int, int] = TurnGroups(handle, _spawn)
    outcomes = await asyncio.gather(groups.submit(1), groups.submit(2), return_exceptions=True)
    assert [str(outcome) for outcome in outcomes] == ["storage down", "storage down"]


async def test_a_caller_cancelled_before_its_group_runs_is_left_out() -> None:
    """A request whose caller was cancelled in the turn it was made is never handled."""
    handled: list[list[int]] = []

    async def handle(requests: list[int]) -> list[int | Exception]:
        handled.append(requests)
        return list(requests)

    groups: TurnGroups[int, int] = TurnGroups(handle, _spawn)
    cancelled = asyncio.ensure_future(groups.submit(1))
    kept = asyncio.ensure_future(groups.submit(2))
    await asyncio.sleep(0)
    cancelled.cancel()
    assert await kept == 2
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert handled == [[2]]


async def test_a_cancelled_group_cancels_its_callers_and_a_new_group_starts() -> None:
    """Cancelling a group's task cancels its callers; the next request is handled anew."""
    started = asyncio.Event()
    tasks: list[asyncio.Future[None]] = []

    async def handle(requests: list[int]) -> list[int | Exception]:
        if not tasks[1:]:
            started.set()
            await asyncio.Event().wait()
        return list(requests)

    def spawn(work: Awaitable[None]) -> asyncio.Future[None]:
        tasks.append(asyncio.ensure_future(work))
        return tasks[-1]

    groups: TurnGroups[int, int] = TurnGroups(handle, spawn)
    waiting = asyncio.ensure_future(groups.submit(1))
    await started.wait()
    tasks[0].cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert await groups.submit(2) == 2
