"""Helpers for deterministic tests: a virtual clock that drives the event loop, a crash
point that crashes an object in the middle of its own handler, fault injection into the
embedded runtime, and a seeded simulation of a worker under faults.

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

`Faults`, given as `Runtime(faults=...)`, is asked at each point where production can
fail (a commit, `set_alarm`, an alarm's delivery time, a cold-store call) whether it
fails now.
"""

from __future__ import annotations

import inspect
import typing

from ._crash_point import crash_point
from ._simulation import (
    Effect,
    FaultRates,
    Invariant,
    Ledger,
    Reply,
    Scenario,
    Simulation,
    SimulationFailure,
    SimulationReport,
    SimulationRun,
    StoredObject,
    appends_kept,
    charged_once,
    effects_at_least_once,
    log_offsets_contiguous,
    nothing_stranded,
)
from ._virtual_clock import VirtualClock
from ._workflow_driver import WorkflowDriver
from .runtime._faults import CommitFault, Faults

__all__ = [
    "CommitFault",
    "Effect",
    "FaultRates",
    "Faults",
    "Invariant",
    "Ledger",
    "Reply",
    "Scenario",
    "Simulation",
    "SimulationFailure",
    "SimulationReport",
    "SimulationRun",
    "StoredObject",
    "VirtualClock",
    "WorkflowDriver",
    "appends_kept",
    "charged_once",
    "crash_point",
    "effects_at_least_once",
    "log_offsets_contiguous",
    "nothing_stranded",
]

# Classes and functions defined in private modules present themselves as
# `durability.testing.X`, where users import them from; a class's own annotations are
# resolved first, in its defining module (as the package root does for its names).
for _name in __all__:
    _value = globals()[_name]
    if not (isinstance(_value, type) or inspect.isfunction(_value)):
        continue
    if _value.__module__.startswith("durability._"):
        if isinstance(_value, type) and inspect.get_annotations(_value):
            _hints = typing.get_type_hints(_value, include_extras=True)
            _value.__annotations__ = {
                field: _hints[field] for field in inspect.get_annotations(_value)
            }
        _value.__module__ = __name__
del _name, _value
