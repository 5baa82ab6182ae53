"""The test's side of an object under test: what its handlers should do in, what they saw
out.

A test builds a `Probe`, binds it beside the object's class (as PROBE) and sets its
`options` and `behaviour`; the object builds its helpers from the options and runs
each handler through the probe (`attempt` for a durable call, `alarm_run` for a named
alarm, `run` for anything else). One probe serves every instance of the object, so
what it saw outlives evictions, crashes and restarts.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from durability import AbortSignal, DurableAlarmInfo, DurableCall, now_ms

Behaviour = Callable[[Any], Any]
"""What a handler does, given what the handler was given (a `DurableCall`, a
`DurableAlarmInfo`...): its result, or an awaitable of it."""


class Probe:
    """Options and behaviours in; calls, alarm runs, lifecycle events and concurrency out."""

    def __init__(self, **options: Any) -> None:
        self.options: dict[str, Any] = options
        """Keywords of the helper the object builds (`Durability(..., **probe.options)`)."""
        self.scheduler_options: dict[str, Any] = {}
        """Keywords of the scheduler the object builds, where it builds one."""
        self.behaviour: dict[str, Behaviour] = {}
        """What the handler does, by key (a call's id, an alarm's name...); unset: the
        handler's default."""
        self.gates: dict[str, asyncio.Event] = {}
        self.events: list[Any] = []
        """Lifecycle events, for `on_lifecycle_event=probe.events.append`."""
        self.calls: list[tuple[str, int, int]] = []
        """Each durable call attempt: (id, attempt, when it started)."""
        self.signals: dict[str, AbortSignal] = {}
        """The abort signal of each call's latest attempt, by id."""
        self.runs: list[DurableAlarmInfo] = []
        """Each named alarm run, in order."""
        self.started_at: list[int] = []
        """When each named alarm run started."""
        self.completed: list[tuple[str, int | None, int]] = []
        """Each named alarm run that returned: (name, occurrence, scheduled time)."""
        self.running: dict[str, int] = {}
        self.max_running = 0
        """The most runs under way at once, of any keys."""
        self.max_per_key = 0
        """The most runs of one key under way at once."""
        self.result: Any = None
        """Whatever the object hands back outside a call's result."""

    def gate(self, name: str) -> asyncio.Event:
        """The event `name`, made on first use: a parked behaviour waits for it."""
        return self.gates.setdefault(name, asyncio.Event())

    def parked(self, gate: str) -> Behaviour:
        """A behaviour that waits until the test opens `gate`."""

        async def behave(given: Any) -> None:
            await self.gate(gate).wait()

        return behave

    async def attempt(self, call: DurableCall, default: Any = None) -> Any:
        """Record an attempt of a durable call and run the behaviour set for its id."""
        self.calls.append((call.id, call.attempt, now_ms()))
        self.signals[call.id] = call.signal
        return await self.run(call.id, call, default)

    async def alarm_run(self, info: DurableAlarmInfo) -> None:
        """Record a named alarm run and run the behaviour set for its name."""
        self.runs.append(info)
        self.started_at.append(now_ms())
        await self.run(info.name, info)
        self.completed.append((info.name, info.occurrence, info.scheduled_time))

    def attempt_now(self, call: DurableCall, default: Any = None) -> Any:
        """`attempt` for a plain (not async) handler: its behaviour must not await."""
        self.calls.append((call.id, call.attempt, now_ms()))
        self.signals[call.id] = call.signal
        behaviour = self.behaviour.get(call.id)
        return default if behaviour is None else behaviour(call)

    async def run(self, key: str, given: Any, default: Any = None) -> Any:
        """Run the behaviour set for `key` on `given` (`default` if none is set) as one run
        of `key` (see `counted`)."""
        behaviour = self.behaviour.get(key)
        return await self.counted(key, default if behaviour is None else behaviour(given))

    async def counted(self, key: str, outcome: Any) -> Any:
        """`outcome`, awaited if it is awaitable, as one run of `key`: counts how many runs
        are under way at once."""
        self.running[key] = self.running.get(key, 0) + 1
        self.max_running = max(self.max_running, sum(self.running.values()))
        self.max_per_key = max(self.max_per_key, self.running[key])
        try:
            return await outcome if inspect.isawaitable(outcome) else outcome
        finally:
            self.running[key] -= 1


def sleeps(ms: int) -> Callable[[Any], Awaitable[None]]:
    """A behaviour that takes `ms` of the clock's time."""

    async def behave(given: Any) -> None:
        await asyncio.sleep(ms / 1000)

    return behave
