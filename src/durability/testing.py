"""Helpers for deterministic tests: a virtual clock that drives the event loop, and a
crash point that crashes an object in the middle of its own handler.

A `VirtualClock` attached to a loop makes that loop's time virtual: `asyncio.sleep`,
`asyncio.timeout`, `asyncio.wait_for`, `loop.call_later` and `loop.call_at` all follow
it, and so does `durability.now_ms()`. Only `advance`/`advance_to` move it, so days of
schedules run in milliseconds and every test sees the same order of events::

    clock = VirtualClock()
    async with Runtime(clock=clock, bindings=...) as rt:   # the runtime attaches it
        ...
        await clock.advance(60_000)        # fire everything due in the next minute

Without a runtime, attach it to the running loop yourself: ``async with clock:``.
`WorkflowDriver(runtime, clock)` reads workflow instances' statuses, sends them events
and moves the clock from one wake-up of an instance to the next.
While attached, the loop never sleeps for a virtual deadline: with nothing ready it
only waits for I/O and threads, so a test that awaits a timer without advancing the
clock waits forever (that is the point: time moves only when the test says so).

`await crash_point()`, inside an object's call or handler (or in a fake binding the
handler awaits), crashes that object right there, as `Runtime.crash` would between
calls: what it had not committed is lost, and its interrupted work is retried.
"""

from __future__ import annotations

from ._crash_point import crash_point
from ._virtual_clock import VirtualClock
from ._workflow_driver import WorkflowDriver

__all__ = ["VirtualClock", "WorkflowDriver", "crash_point"]
