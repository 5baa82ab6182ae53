"""`VirtualClock`: a clock that moves only when told to, and makes its loop's time follow it.

The runtime attaches it (`Runtime(clock=...)`); `durability serve --virtual-time` and the
dashboard's advance button run on it; tests get it from `durability.testing`. The loop
mechanics are in `_virtual_loop`.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from ._clock import bind_clock, unbind_clock
from ._types import TimeInput
from ._validate import check_non_negative_int, to_epoch_ms
from ._virtual_loop import LoopPatch


class VirtualClock:
    """A clock that moves only when told to, and the loop timers that follow it."""

    def __init__(self, start_ms: TimeInput = 1_700_000_000_000) -> None:
        self._seconds = to_epoch_ms("start_ms", start_ms) / 1000
        self._patch: LoopPatch | None = None
        self._attachments = 0
        self._advancing = False

    def __repr__(self) -> str:
        state = "attached" if self._patch is not None else "detached"
        return f"VirtualClock(now_ms={self.now_ms()}, {state})"

    def now_ms(self) -> int:
        """The virtual time in milliseconds since the epoch."""
        return round(self._seconds * 1000)

    def attach(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Make `loop` (default: the running loop) and `now_ms()` on it follow this clock.

        Timers already scheduled keep their remaining delay, now in virtual time.
        Attaching again to the same loop nests (each `attach` needs its `detach`); a
        clock drives one loop at a time.
        """
        target = loop if loop is not None else asyncio.get_running_loop()
        if self._patch is not None:
            if self._patch.loop is not target:
                raise RuntimeError("this VirtualClock is already attached to another event loop")
            self._attachments += 1
            return
        patch = LoopPatch(target, self._loop_time)
        patch.apply()
        bind_clock(target, self)
        self._patch = patch
        self._attachments = 1

    def detach(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Undo one `attach`; the last one gives the loop back its real time.

        Timers still scheduled keep their remaining delay, now in real time.
        """
        target = loop if loop is not None else asyncio.get_running_loop()
        patch = self._patch
        if patch is None or patch.loop is not target:
            raise RuntimeError("this VirtualClock is not attached to that event loop")
        self._attachments -= 1
        if self._attachments > 0:
            return
        self._patch = None
        unbind_clock(target, self)
        patch.restore()

    async def __aenter__(self) -> VirtualClock:
        self.attach()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.detach()

    async def advance(self, ms: int) -> None:
        """Move time forward by `ms`, firing in order every timer that comes due."""
        step = check_non_negative_int("ms", ms)
        await self.advance_to(self.now_ms() + step)

    async def advance_to(self, ms: TimeInput) -> None:
        """Move time forward to `ms`, firing in order every timer that comes due.

        Timers due at the same instant run together; after each, the work they start
        runs until it waits on time again. `ms` may also be an aware datetime. Time never
        moves backwards: a target in the past raises `ValueError`.
        """
        target_ms = to_epoch_ms("ms", ms)
        if target_ms < self.now_ms():
            raise ValueError(
                f"ms must not be in the past (now_ms() is {self.now_ms()}, got {target_ms})"
            )
        patch = self._running_patch()
        target = target_ms / 1000
        if patch is None:
            self._seconds = max(self._seconds, target)
            return
        await self._drive(patch, target)
        self._seconds = max(self._seconds, target)

    async def run_until_idle(self) -> None:
        """Run everything that is ready (and timers due now) without moving time."""
        patch = self._running_patch()
        if patch is None:
            await asyncio.sleep(0)
            return
        await self._drive(patch, None)

    def _loop_time(self) -> float:
        return self._seconds

    async def _drive(self, patch: LoopPatch, target: float | None) -> None:
        def move_to(seconds: float) -> None:
            if seconds > self._seconds:
                self._seconds = seconds
                patch.refresh_resolution()

        self._advancing = True
        try:
            await patch.drive(target, move_to)
        finally:
            self._advancing = False

    def _running_patch(self) -> LoopPatch | None:
        """The patch of the running loop (None when detached); refuses misuse."""
        if self._advancing:
            raise RuntimeError("VirtualClock is already advancing: await one advance at a time")
        patch = self._patch
        if patch is None:
            return None
        if asyncio.get_running_loop() is not patch.loop:
            raise RuntimeError("advance the VirtualClock from the event loop it is attached to")
        return patch
