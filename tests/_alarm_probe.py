"""An object whose named alarms do what the test says, for the alarm control tests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from durability import DurabilityAlarms, DurableAlarmInfo, now_ms
from durability.cloudflare import adapt
from durability.runtime import DurableObject

Behaviour = Callable[[DurableAlarmInfo], Awaitable[Any]]
NAMES = ("renew", "tick", "report")


class Probe:
    """The test's side of the object: handler behaviours in, observations out."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.behaviour: dict[str, Behaviour] = {}
        self.runs: list[DurableAlarmInfo] = []
        self.started_at: list[int] = []
        self.completed: list[tuple[str, int | None, int]] = []
        self.events: list[Any] = []
        self.gates: dict[str, asyncio.Event] = {}
        self.result: Any = None

    def gate(self, name: str) -> asyncio.Event:
        return self.gates.setdefault(name, asyncio.Event())

    def parked(self, gate: str) -> Behaviour:
        """A behaviour that waits until the test opens `gate`."""

        async def behave(info: DurableAlarmInfo) -> None:
            await self.gate(gate).wait()

        return behave


class Clockwork(DurableObject):
    """Named alarms on a private scheduler; `call` runs one handle method for the test."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.probe: Probe = env["PROBE"]
        self.alarms = DurabilityAlarms(
            context=ctx,
            handlers={name: self._handle for name in NAMES},
            on_lifecycle_event=self.probe.events.append,
            **self.probe.options,
        )

    async def _handle(self, info: DurableAlarmInfo) -> None:
        probe = self.probe
        probe.runs.append(info)
        probe.started_at.append(now_ms())
        behaviour = probe.behaviour.get(info.name)
        if behaviour is not None:
            await behaviour(info)
        probe.completed.append((info.name, info.occurrence, info.scheduled_time))

    async def call(self, name: str, method: str, *args: Any, **kwargs: Any) -> None:
        """Run `alarms.<name>.<method>(...)` and keep its result in `probe.result`."""
        handle = self.alarms.named(name)
        target = handle if method == "__call__" else getattr(handle, method)
        self.probe.result = await target(*args, **kwargs)

    async def pending(self) -> None:
        self.probe.result = await self.alarms.pending()

    async def rows(self) -> list[dict[str, Any]]:
        return (
            adapt(self.ctx)
            .storage.sql.exec(
                "SELECT name, status, attempt, scheduled_at, next_attempt_at, occurrence, "
                "last_error_name FROM durability_alarms ORDER BY name"
            )
            .to_list()
        )

    async def alarm(self, info: Any = None) -> None:
        await self.alarms.alarm(info)
