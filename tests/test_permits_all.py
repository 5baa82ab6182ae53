"""Taking every permit of the pool (a suspect run alone) never deadlocks another such take."""

from __future__ import annotations

import asyncio

from durability._engine.permits import PermitPool


async def test_two_takes_of_every_permit_waiting_together_both_get_them_in_turn() -> None:
    """Two callers wait for the whole pool while its permits are busy: as the permits
    come back, the first caller gets all of them, then, once it gives them back, the
    second; neither keeps part of the pool while waiting for the rest."""
    pool = PermitPool(2)
    busy = [pool.try_acquire(), pool.try_acquire()]
    order: list[str] = []

    async def alone(name: str) -> None:
        release = await pool.take_all()
        order.append(name)
        await asyncio.sleep(0)
        assert pool.free == 0
        release()

    first = asyncio.ensure_future(alone("first"))
    second = asyncio.ensure_future(alone("second"))
    await asyncio.sleep(0)
    for release in busy:
        assert release is not None
        release()
    for _ in range(10):
        await asyncio.sleep(0)
    assert order == ["first", "second"]
    assert pool.free == 2
    await asyncio.gather(first, second)
