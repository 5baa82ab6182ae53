"""Loop mechanics behind `VirtualClock` (`_virtual_clock`).

An asyncio selector loop is made to follow a virtual time by patching, on the loop
instance only: `time()` (reads the virtual clock), the selector's `select` (never
sleeps real seconds for a virtual deadline, waits only for I/O), `_clock_resolution`
(so a timer due at exactly "now" runs even at epoch-sized float magnitudes) and
`run_in_executor` (so settling can wait for work handed to threads). Everything is
restored by `restore`, and the timers already scheduled are shifted so their remaining
delays carry over between real and virtual time.
"""

from __future__ import annotations

import asyncio
import heapq
import math
from collections.abc import Callable, Collection
from concurrent.futures import Executor
from typing import Any, TypeVar

T = TypeVar("T")

MAX_SETTLE_ROUNDS = 100_000
"""Loop iterations in a row without going idle before an advance calls it a busy loop."""

_MISSING = object()


class LoopPatch:
    """The patches applied to one loop, and what they replaced."""

    def __init__(self, loop: asyncio.AbstractEventLoop, time_source: Callable[[], float]) -> None:
        base = _check_patchable(loop)
        self.loop = base
        self._time_source = time_source
        self._saved: dict[str, object] = {}
        self._saved_select: object = _MISSING
        self.pending_executor: set[asyncio.Future[Any]] = set()
        self._ready: Collection[object] = getattr(base, "_ready")  # noqa: B009
        self._resolution_valid_below = -math.inf
        self._drive: _Drive | None = None

    def apply(self) -> None:
        """Make the loop follow `time_source` from now on."""
        loop = self.loop
        real_now = loop.time()
        selector: Any = getattr(loop, "_selector")  # noqa: B009
        for name in ("time", "run_in_executor", "_clock_resolution"):
            self._saved[name] = loop.__dict__.get(name, _MISSING)
        self._saved_select = selector.__dict__.get("select", _MISSING)
        original_select = selector.select
        original_run_in_executor = loop.run_in_executor
        pending = self.pending_executor

        def select(timeout: float | None = None) -> Any:
            drive = self._drive
            if drive is not None and not getattr(loop, "_stopping") and self._step(drive):  # noqa: B009
                timeout = 0
            # A positive timeout can only come from a virtual timer: wait for I/O alone,
            # unless that timer is due already (within the clock's resolution of now,
            # though its float time is a hair later): then the loop must run it.
            if timeout is not None and timeout > 0:
                timeout = 0 if self.is_due(self.next_timer()) else None
            return original_select(timeout)

        def run_in_executor(
            executor: Executor | None, func: Callable[..., T], *args: Any
        ) -> asyncio.Future[T]:
            future = original_run_in_executor(executor, func, *args)
            pending.add(future)
            future.add_done_callback(pending.discard)
            return future

        selector.select = select
        loop.__dict__["run_in_executor"] = run_in_executor
        loop.__dict__["time"] = self._time_source
        self.refresh_resolution()
        _shift_timers(loop, self._time_source() - real_now)

    def restore(self) -> None:
        """Give the loop back its own time and methods; a drive in progress ends here."""
        loop = self.loop
        drive = self._drive
        if drive is not None and not drive.done.done():
            drive.done.set_result(None)
        virtual_now = loop.time()
        selector: Any = getattr(loop, "_selector")  # noqa: B009
        for name, value in self._saved.items():
            if value is _MISSING:
                loop.__dict__.pop(name, None)
            else:
                loop.__dict__[name] = value
        if self._saved_select is _MISSING:
            selector.__dict__.pop("select", None)
        else:
            selector.select = self._saved_select
        _shift_timers(loop, loop.time() - virtual_now)

    def refresh_resolution(self) -> None:
        """Keep "due now" meaningful: the resolution must exceed the float step at now.

        The float step only changes at powers of two, so most calls return at once.
        """
        now = self._time_source()
        if now < self._resolution_valid_below:
            return
        original = self._saved.get("_clock_resolution", _MISSING)
        base = original if isinstance(original, float) else 1e-9
        exponent = math.frexp(now)[1]
        self._resolution_valid_below = math.ldexp(1.0, exponent)
        resolution = max(base, 4 * math.ulp(self._resolution_valid_below))
        setattr(self.loop, "_clock_resolution", resolution)  # noqa: B010

    def next_timer(self) -> float | None:
        """The loop time of the earliest live timer, or `None` when there is none."""
        scheduled: list[asyncio.TimerHandle] = getattr(self.loop, "_scheduled")  # noqa: B009
        if not scheduled:
            return None
        if not scheduled[0].cancelled():
            return scheduled[0].when()
        return min((h.when() for h in scheduled if not h.cancelled()), default=None)

    def is_due(self, when: float | None) -> bool:
        """Whether a timer at loop time `when` runs in the loop's next iteration."""
        resolution: float = getattr(self.loop, "_clock_resolution")  # noqa: B009
        return when is not None and when < self._time_source() + resolution

    def drive(self, target: float | None, move: Callable[[float], None]) -> asyncio.Future[None]:
        """Run the loop until idle, stepping time through due timers up to `target`.

        With `target=None` time does not move. The returned future is done once the
        loop is idle at `target`. The stepping happens in the selector call of each
        loop iteration, the one moment the loop knows whether it has nothing ready.
        """
        done: asyncio.Future[None] = self.loop.create_future()
        drive = _Drive(target, move, done)
        self._drive = drive

        def forget(_: asyncio.Future[None]) -> None:
            if self._drive is drive:
                self._drive = None

        done.add_done_callback(forget)
        return done

    def _step(self, drive: _Drive) -> bool:
        """Move `drive` on if the loop is idle; True when the loop must not block.

        Idle means nothing ready, no timer due now and no thread work pending; then
        time moves to the next timer (up to the target), or the drive is over.
        """
        if drive.done.done() or self.pending_executor:
            return False
        when = self.next_timer()
        if when is not None and not self._ready and self.is_due(when):
            # Due within the resolution, yet a hair later than now: time reaches it, so
            # code that compares its deadline with the loop's time sees it has passed.
            drive.move(when)
        if self._ready or self.is_due(when):
            drive.busy_rounds += 1
            if drive.busy_rounds > MAX_SETTLE_ROUNDS:
                drive.done.set_exception(RuntimeError(_busy_message()))
            return False
        drive.busy_rounds = 0
        target = drive.target
        if target is not None:
            if when is not None and when <= target:
                drive.move(when)
                return True
            if self._time_source() < target:
                drive.move(target)
                return True
        drive.done.set_result(None)
        return True


class _Drive:
    """One `advance_to`/`run_until_idle` in progress."""

    __slots__ = ("busy_rounds", "done", "move", "target")

    def __init__(
        self, target: float | None, move: Callable[[float], None], done: asyncio.Future[None]
    ) -> None:
        self.target = target
        self.move = move
        self.done = done
        self.busy_rounds = 0


def _busy_message() -> str:
    return (
        f"the event loop was still busy after {MAX_SETTLE_ROUNDS} iterations without "
        "becoming idle: a task probably keeps rescheduling itself (e.g. a loop around "
        "asyncio.sleep(0))"
    )


def _check_patchable(loop: asyncio.AbstractEventLoop) -> asyncio.BaseEventLoop:
    """The loop as a stdlib selector loop, else `TypeError` saying what is supported."""
    if not isinstance(loop, asyncio.BaseEventLoop) or not hasattr(loop, "_selector"):
        raise TypeError(
            f"VirtualClock needs a standard asyncio selector event loop, got {type(loop).__name__}"
        )
    return loop


def _shift_timers(loop: asyncio.BaseEventLoop, delta: float) -> None:
    """Move every scheduled timer by `delta` seconds (a uniform shift keeps the heap valid)."""
    if delta == 0:
        return
    scheduled: list[asyncio.TimerHandle] = getattr(loop, "_scheduled")  # noqa: B009
    for handle in scheduled:
        setattr(handle, "_when", handle.when() + delta)  # noqa: B010
    heapq.heapify(scheduled)
