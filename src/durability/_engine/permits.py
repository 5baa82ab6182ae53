"""The permit pool: at most `alarm_concurrency` attempts of one scheduler at once.

One FIFO pool is shared by eager starts and alarm passes of every helper on the
scheduler, so no helper can starve another. A permit is held until its attempt's
outcome is persisted and its handler has ended, never less.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

Item = TypeVar("Item")

Release = Callable[[], None]
"""Gives a permit back (to the oldest waiter first); calling it twice is a no-op."""


class PermitPool:
    """`size` permits handed out in FIFO order."""

    __slots__ = ("_available", "_waiters", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self._available = size
        self._waiters: deque[asyncio.Future[Release]] = deque()

    def try_acquire(self) -> Release | None:
        """A permit if one is free right now, else `None` (never waits)."""
        if self._available == 0:
            return None
        self._available -= 1
        return self._release_once()

    async def acquire(self) -> Release:
        """Wait in FIFO order for a permit."""
        release = self.try_acquire()
        if release is not None:
            return release
        waiter: asyncio.Future[Release] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                waiter.result()()
            raise

    def _release_once(self) -> Release:
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            while self._waiters:
                waiter = self._waiters.popleft()
                if not waiter.done():
                    waiter.set_result(self._release_once())
                    return
            self._available += 1

        return release

    async def run_concurrent(
        self,
        items: Iterable[Item],
        worker: Callable[[Item], Awaitable[None]],
        *,
        taken_all: Callable[[], None] | None = None,
    ) -> None:
        """Run `worker` over `items` in order with at most `size` running at once.

        `taken_all()` is called once the last item is taken (before its worker starts),
        or when the run ends early; it must be safe to call twice.
        """
        pending = list(items)
        cursor = iter(pending)
        taken = 0

        async def pull() -> None:
            nonlocal taken
            for item in cursor:
                taken += 1
                if taken == len(pending) and taken_all is not None:
                    taken_all()
                await worker(item)

        try:
            await asyncio.gather(*(pull() for _ in range(min(self.size, len(pending)))))
        finally:
            if taken_all is not None:
                taken_all()
