"""The one source of "now" for library code.

A host binds a clock to the event loop it runs on; `now_ms()` reads the clock bound to
the running loop, or the wall clock when none is bound. Timers are set on the loop
itself (`asyncio.sleep`, `loop.call_later`): a virtual clock makes the loop's own time
virtual, so those follow it too.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from typing import Protocol


class Clock(Protocol):
    """Anything that tells the current time in integer milliseconds since the epoch."""

    def now_ms(self) -> int: ...


class WallClock:
    """The real time of this machine."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


WALL_CLOCK = WallClock()

_bound: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Clock] = weakref.WeakKeyDictionary()


_last: tuple[weakref.ref[asyncio.AbstractEventLoop], Clock] | None = None
"""The loop `current_clock` last looked up, and its clock (it is called very often)."""

_wall_only = True
"""No loop has a clock other than the wall clock bound: `now_ms` need not look up the
running loop (on Python 3.11 that costs a `getpid` system call each time)."""


def _rebound() -> None:
    """Forget the cached lookup after a binding changed, and recompute `_wall_only`."""
    global _last, _wall_only
    _last = None
    _wall_only = all(clock is WALL_CLOCK for clock in _bound.values())


def bind_clock(loop: asyncio.AbstractEventLoop, clock: Clock) -> None:
    """Make `clock` the time source of code running on `loop`."""
    _bound[loop] = clock
    _rebound()


def unbind_clock(loop: asyncio.AbstractEventLoop, clock: Clock) -> None:
    """Forget `clock` for `loop` if it is still the one bound there."""
    if _bound.get(loop) is clock:
        del _bound[loop]
        _rebound()


def current_clock() -> Clock:
    """The clock bound to the running loop, else the wall clock."""
    global _last
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return WALL_CLOCK
    last = _last
    if last is not None and last[0]() is loop:
        return last[1]
    clock = _bound.get(loop, WALL_CLOCK)
    _last = (weakref.ref(loop), clock)
    return clock


def now_ms() -> int:
    """The current time in ms of the clock of the runtime the caller runs in."""
    # `current_clock`'s cached case inline, and the wall clock read without a method
    # call: this runs a few times per durable operation.
    if _wall_only:
        return time.time_ns() // 1_000_000
    last = _last
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return time.time_ns() // 1_000_000
    clock = last[1] if last is not None and last[0]() is loop else current_clock()
    if clock is WALL_CLOCK:
        return time.time_ns() // 1_000_000
    return clock.now_ms()
