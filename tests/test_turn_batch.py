"""Requests of one loop turn handled together: each caller gets its own outcome, and a
group whose task is cancelled fails its callers definitely."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import pytest

from durability import DurabilityError
from durability._engine.tasks import close_unstarted
from durability._engine.turns import Then, TurnBatch
from durability.runtime import ObjectEvictedError

Handled = tuple[list[int | Exception], Then]


def _spawn(work: Awaitable[None]) -> asyncio.Future[None]:
    return asyncio.ensure_future(work)


async def test_each_caller_gets_the_outcome_handle_gave_its_request() -> None:
    """Results and per-request exceptions go to the caller of that request."""
    handled: list[list[int]] = []

    async def handle(requests: list[int]) -> Handled:
        handled.append(requests)
        return [ValueError(n) if n < 0 else n * 10 for n in requests], None

    groups: TurnBatch[int, int] = TurnBatch(handle, _spawn, "enqueue")
    outcomes = await asyncio.gather(*(groups.add(n) for n in (1, -2, 3)), return_exceptions=True)
    assert outcomes[0] == 10 and outcomes[2] == 30
    assert isinstance(outcomes[1], ValueError) and outcomes[1].args == (-2,)
    assert handled == [[1, -2, 3]]
    assert await groups.add(4) == 40
    assert handled == [[1, -2, 3], [4]]


async def test_what_follows_a_group_runs_once_its_callers_are_answered() -> None:
    """`handle`'s follow-up runs after every caller's future has its outcome, and what
    it schedules runs after the callers resume (a reply leaves before handlers write)."""
    order: list[str] = []

    def follow_up() -> None:
        order.append("then")
        asyncio.get_running_loop().call_soon(order.append, "scheduled by then")

    async def handle(requests: list[int]) -> Handled:
        return list(requests), follow_up

    groups: TurnBatch[int, int] = TurnBatch(handle, _spawn, "registration")

    async def caller(n: int) -> None:
        await groups.add(n)
        order.append(f"caller {n}")

    await asyncio.gather(caller(1), caller(2))
    await asyncio.sleep(0)
    assert order == ["then", "caller 1", "caller 2", "scheduled by then"]


async def test_a_failing_handle_fails_every_caller_of_its_group() -> None:
    """When `handle` itself raises, every caller of that group gets its error."""

    async def handle(requests: list[int]) -> Handled:
        raise RuntimeError("storage down")

    groups: TurnBatch[int, int] = TurnBatch(handle, _spawn, "enqueue")
    outcomes = await asyncio.gather(groups.add(1), groups.add(2), return_exceptions=True)
    assert [str(outcome) for outcome in outcomes] == ["storage down", "storage down"]


async def test_a_caller_cancelled_before_its_group_runs_is_left_out() -> None:
    """A request whose caller was cancelled in the turn it was made is never handled."""
    handled: list[list[int]] = []

    async def handle(requests: list[int]) -> Handled:
        handled.append(requests)
        return list(requests), None

    groups: TurnBatch[int, int] = TurnBatch(handle, _spawn, "enqueue")
    cancelled = groups.add(1)
    kept = groups.add(2)
    cancelled.cancel()
    assert await kept == 2
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert handled == [[2]]


async def test_a_cancelled_group_fails_its_callers_with_an_unknown_outcome() -> None:
    """Cancelling a group's task fails its callers with a `DurabilityError` saying the
    outcome is unknown (never a `CancelledError` they did not ask for); the next request
    is handled anew."""
    started = asyncio.Event()
    tasks: list[asyncio.Future[None]] = []

    async def handle(requests: list[int]) -> Handled:
        if not tasks[1:]:
            started.set()
            await asyncio.Event().wait()
        return list(requests), None

    def spawn(work: Awaitable[None]) -> asyncio.Future[None]:
        tasks.append(asyncio.ensure_future(work))
        return tasks[-1]

    groups: TurnBatch[int, int] = TurnBatch(handle, spawn, "enqueue")
    waiting = [asyncio.ensure_future(groups.add(n)) for n in (1, 2)]
    await started.wait()
    tasks[0].cancel()
    for caller in waiting:
        with pytest.raises(DurabilityError, match="whether it was stored is unknown"):
            await caller
        assert not caller.cancelled()
    assert await groups.add(3) == 3


async def test_a_group_cancelled_by_eviction_gives_its_callers_the_eviction_error() -> None:
    """When the host refuses new work (the instance is gone), a caller of the cancelled
    group gets the host's refusal, as any other call of the evicted instance would."""
    started = asyncio.Event()
    tasks: list[asyncio.Future[None]] = []
    gone = ObjectEvictedError("object T:x was evicted: wait_until is refused")
    evicted = asyncio.Event()

    async def handle(requests: list[int]) -> Handled:
        started.set()
        await asyncio.Event().wait()
        return list(requests), None

    def spawn(work: Awaitable[None]) -> asyncio.Future[None]:
        if evicted.is_set():
            close_unstarted(work)
            raise gone
        tasks.append(asyncio.ensure_future(work))
        return tasks[-1]

    groups: TurnBatch[int, int] = TurnBatch(handle, spawn, "enqueue")
    waiting = asyncio.ensure_future(groups.add(1))
    await started.wait()
    evicted.set()  # as the runtime does: fence the instance, then cancel its work
    tasks[0].cancel()
    with pytest.raises(ObjectEvictedError) as raised:
        await waiting
    assert raised.value is gone


async def test_a_group_cancelled_before_it_ran_answers_its_callers_and_frees_the_batch() -> None:
    """A group's task cancelled before its first step still answers its callers, and the
    next request starts a new group instead of joining the dead one."""
    tasks: list[asyncio.Future[None]] = []

    async def handle(requests: list[int]) -> Handled:
        await asyncio.Event().wait()
        return list(requests), None

    def spawn(work: Awaitable[None]) -> asyncio.Future[None]:
        tasks.append(asyncio.ensure_future(work))
        return tasks[-1]

    groups: TurnBatch[int, int] = TurnBatch(handle, spawn, "registration")
    futures = [groups.add(1), groups.add(2)]
    tasks[0].cancel()  # before the loop ever ran it
    for future in futures:
        with pytest.raises(DurabilityError, match="registration was abandoned"):
            await future
    started = len(tasks)
    late = groups.add(3)
    assert len(tasks) == started + 1
    tasks[-1].cancel()
    with pytest.raises(DurabilityError):
        await late
