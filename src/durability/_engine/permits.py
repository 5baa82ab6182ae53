"""The permit pool: at most `alarm_concurrency` attempts of one scheduler at once.

One FIFO pool is shared by eager starts and alarm passes of every helper on the
scheduler, so no helper can starve another. A permit is held until its attempt's
outcome is persisted and its handler has ended, never less; the one exception is a
handler that returned without awaiting, whose permit a batch may hand to its next
attempt at once (its outcome is written with theirs before anything else runs).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

Release = Callable[[], None]
"""Gives a permit back (to the oldest waiter first); calling it twice is a no-op."""


def no_permit() -> None:
    """The release of an attempt without a permit yet (or any more: one it handed on):
    nothing to give back."""


class PermitPool:
    """`size` permits handed out in FIFO order."""

    __slots__ = ("_available", "_waiters", "_whole", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self._available = size
        self._waiters: deque[asyncio.Future[Release]] = deque()
        self._whole = asyncio.Lock()
        """Held by the one `take_all` gathering the pool."""

    @property
    def free(self) -> int:
        """How many permits `try_acquire` would hand out right now."""
        return self._available

    @property
    def waited_for(self) -> bool:
        """Whether someone waits for a permit (the next one released goes to them)."""
        return bool(self._waiters)

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

    async def take(self, count: int) -> list[Release]:
        """At least one and at most `count` permits: every one free now, or else the
        next one in FIFO order."""
        taken = [self.try_acquire() or await self.acquire()]
        while len(taken) < count:
            more = self.try_acquire()
            if more is None:
                break
            taken.append(more)
        return taken

    async def take_all(self) -> Release:
        """Every permit of the pool, taken one by one in FIFO order as they come free (so
        nothing else of the scheduler runs while they are held); one release gives them
        all back. One such take gathers at a time: two that each kept part of the pool
        while waiting for the rest would wait for each other forever."""
        taken: list[Release] = []
        async with self._whole:
            try:
                while len(taken) < self.size:
                    taken.append(self.try_acquire() or await self.acquire())
            except BaseException:
                for release in taken:
                    release()
                raise

        def release_all() -> None:
            for release in taken:
                release()

        return release_all
