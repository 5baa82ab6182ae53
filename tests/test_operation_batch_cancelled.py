"""A registration batch whose write is cancelled under its callers fails them definitely."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from types import SimpleNamespace
from typing import Any

import pytest

from durability import DurabilityError
from durability._engine.tasks import close_unstarted
from durability._operations.registrations import RegistrationBatch
from durability.runtime import ObjectEvictedError


class _Blocked(RegistrationBatch):
    """A batch whose write never finishes, so only a cancel ends it."""

    async def write(self, rows: list[Any], claims: Any = None) -> list[bool | Exception]:  # type: ignore[override]
        await asyncio.Event().wait()
        return []


def _batch(refusals: list[Exception]) -> tuple[RegistrationBatch, list[asyncio.Task[Any]]]:
    """A batch on a host that refuses new work with `refusals[0]` once it holds one."""
    tasks: list[asyncio.Task[Any]] = []

    def spawn(work: Awaitable[Any]) -> asyncio.Task[Any]:
        if refusals:
            close_unstarted(work)
            raise refusals[0]
        tasks.append(asyncio.ensure_future(work))
        return tasks[-1]

    engine: Any = SimpleNamespace(tasks=SimpleNamespace(spawn=spawn))
    return _Blocked(engine, lambda rows, claims: None, lambda rows: None), tasks


async def test_a_cancelled_write_fails_its_callers_with_an_unknown_outcome() -> None:
    """Callers of a registration write cancelled under them get a `DurabilityError`
    saying the outcome is unknown, not a `CancelledError` they did not ask for."""
    batch, tasks = _batch([])
    futures = [batch.add(object()), batch.add(object())]  # type: ignore[arg-type]
    await asyncio.sleep(0)
    tasks[0].cancel()
    for future in futures:
        with pytest.raises(DurabilityError, match="whether it was stored is unknown"):
            await future


async def test_a_write_cancelled_by_eviction_gives_its_callers_the_eviction_error() -> None:
    """When the host refuses new work (the instance is gone), callers get its refusal."""
    gone = ObjectEvictedError("object T:x was evicted: wait_until is refused")
    refusals: list[Exception] = []
    batch, tasks = _batch(refusals)
    future = batch.add(object())  # type: ignore[arg-type]
    await asyncio.sleep(0)
    refusals.append(gone)  # as the runtime does: fence the instance, then cancel its work
    tasks[0].cancel()
    with pytest.raises(ObjectEvictedError) as raised:
        await future
    assert raised.value is gone


async def test_a_write_cancelled_before_it_ran_answers_its_callers_and_frees_the_batch() -> None:
    """A write task cancelled before its first step still answers its callers, and the
    next registration starts a new write instead of joining the dead one."""
    batch, tasks = _batch([])
    futures = [batch.add(object()), batch.add(object())]  # type: ignore[arg-type]
    tasks[0].cancel()  # before the loop ever ran it
    for future in futures:
        with pytest.raises(DurabilityError, match="whether it was stored is unknown"):
            await future
    started = len(tasks)
    late = batch.add(object())  # type: ignore[arg-type]
    assert len(tasks) == started + 1
    tasks[-1].cancel()
    with pytest.raises(DurabilityError):
        await late
