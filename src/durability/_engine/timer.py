"""The early timer: starts near-term work at its exact time while the instance lives.

The physical alarm is a bounded fallback, never armed sooner than `alarm_min_delay_ms`
after a commit; this in-memory timer covers the gap. It is lost on eviction, which is
fine: the alarm then serves everything, at most the min delay late.

A table whose running pass is still taking due rows (waiting for permits) is never
timed: that pass is owed the table's next pass, which starts once it has taken its
last row. Timing it instead would start passes that skip it, whose reconciles would
time it again: one transaction per turn of the event loop while permits are held.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection

from .._clock import now_ms
from .options import SchedulerOptions
from .reconcile import TimerTimes

MAX_TIMER_MS = 2**31 - 1
"""Timers further out than this are never set; only the physical alarm serves them."""

StartPass = Callable[[int, Callable[[str], bool]], None]
"""`start_pass(timestamp, wanted)` starts a pass over the tables for which `wanted(table)`."""


class EarlyTimer:
    """One in-memory timer per engine, re-armed after every reconciling transaction."""

    __slots__ = ("_armed", "_options", "_owed", "_pulling", "_start_pass")

    def __init__(self, options: SchedulerOptions, start_pass: StartPass) -> None:
        self._options = options
        self._start_pass = start_pass
        self._armed: tuple[int, asyncio.TimerHandle] | None = None
        self._pulling: dict[str, int] = {}
        self._owed: set[str] = set()

    def serving(self) -> Collection[str]:
        """The tables whose running pass is still taking due rows (a snapshot)."""
        return frozenset(self._pulling)

    def schedule(self, times: TimerTimes) -> None:
        """Fire at `times.at`, replacing the armed time; a deferred table still being
        taken is owed a pass, one taken since then counts in the time."""
        now = now_ms()
        timestamp = times.at
        for table, at in times.deferred.items():
            if table in self._pulling:
                if self._arms(at - now):
                    self._owed.add(table)
            elif timestamp is None or at < timestamp:
                timestamp = at
        self._arm(timestamp, now)

    def stop(self) -> None:
        """Disarm the timer and forget the passes owed (there is no due work left)."""
        if self._armed is not None:
            self._armed[1].cancel()
            self._armed = None
        self._owed.clear()

    def _arms(self, delay: int) -> bool:
        # Without live timers the physical alarm serves everything from the min delay on.
        live = self._options.live_timers or delay < self._options.alarm_min_delay_ms
        return live and delay <= MAX_TIMER_MS

    def _arm(self, timestamp: int | None, now: int) -> None:
        if self._armed is not None:
            # Keep the same timer, or one already due (a new due one fires no sooner).
            armed = self._armed[0]
            if armed == timestamp or (timestamp is not None and max(armed, timestamp) <= now):
                return
            self._armed[1].cancel()
            self._armed = None
        if timestamp is None or not self._arms(timestamp - now):
            return
        delay = timestamp - now
        loop = asyncio.get_running_loop()
        handle = loop.call_later(max(delay, 0) / 1000, self._fire, timestamp)
        self._armed = (timestamp, handle)

    def _fire(self, timestamp: int) -> None:
        if self._armed is None or self._armed[0] != timestamp:
            return
        self._armed = None
        # A table whose pass began taking rows after this time was armed (or whose row
        # came through the reconcile's shortcut) would mostly read those same rows
        # again: its part is owed until that pass has taken its last row.
        busy = set(self._pulling)
        self._owed |= busy
        self._start_pass(timestamp, lambda table: table not in busy)

    def pulling(self, table: str) -> Callable[[], None]:
        """Mark a pass over `table` as still taking due rows; returns its `done()`.

        Until every such pass is done, the timer skips `table`; the `done()` that
        leaves it free starts the pass it was owed. Calling `done()` again is a no-op.
        """
        self._pulling[table] = self._pulling.get(table, 0) + 1
        pulling = True

        def done() -> None:
            nonlocal pulling
            if not pulling:
                return
            pulling = False
            left = self._pulling[table] - 1
            if left:
                self._pulling[table] = left
                return
            del self._pulling[table]
            if table not in self._owed:
                return
            self._owed.discard(table)
            self._start_pass(now_ms(), lambda wanted: wanted == table)

        return done
