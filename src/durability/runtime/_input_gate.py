"""The input gate of `ctx.blockConcurrencyWhile`: while a block runs, no other call or
alarm is delivered to the object."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


class InputGate:
    """Counts the blocks running; `closed` while any does. Blocks started while the
    object is being built (`building`) are kept, so the first call waits for them."""

    __slots__ = ("_open", "building", "closed")

    def __init__(self) -> None:
        self.closed = 0
        """How many blocks are running (deliveries wait while it is not 0)."""
        self._open = asyncio.Event()
        self._open.set()
        self.building: list[asyncio.Future[Any]] | None = None
        """While the user object is being built: the blocks its constructor started."""

    async def wait(self) -> None:
        """Return once no block runs."""
        while self.closed:
            await self._open.wait()

    def block_while(
        self, fn: Callable[[], Awaitable[T] | T], track: Callable[[asyncio.Future[Any]], None]
    ) -> asyncio.Future[T]:
        """Call `fn()` now; while its result (awaited when it is awaitable) is not ready,
        the gate is closed. The returned future gets that result; `track` is given the
        task that awaits it (so the object's eviction cancels it)."""
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {type(fn).__name__}")
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[T] = loop.create_future()
        try:
            result = fn()
        except Exception as error:
            ready.set_exception(error)
            return ready
        if not inspect.isawaitable(result):
            ready.set_result(result)
            return ready
        self.closed += 1
        self._open.clear()
        block: asyncio.Future[T] = asyncio.ensure_future(result)
        block.add_done_callback(self._reopen)
        track(block)
        if self.building is not None:
            self.building.append(block)
        return block

    def _reopen(self, block: asyncio.Future[Any]) -> None:
        self.closed -= 1
        if not self.closed:
            self._open.set()

    async def built(self, build: Callable[[], T], forget: Callable[[], None]) -> T:
        """`build()`, once the blocks it started (a constructor calling
        `blockConcurrencyWhile` without `await`) have ended; if one failed, `forget()` is
        called (the object is built again by the next call) and the failure raised."""
        self.building = []
        try:
            built = build()
        finally:
            started, self.building = self.building, None
        if started:
            try:
                await asyncio.gather(*started)
            except BaseException:
                forget()
                raise
        return built
