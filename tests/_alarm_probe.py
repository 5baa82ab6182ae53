"""An object whose named alarms do what its `Probe` says, for the alarm control tests."""

from __future__ import annotations

from typing import Any

from _probe import Probe
from durability import DurabilityAlarms, DurableAlarmInfo
from durability.cloudflare import adapt
from durability.runtime import DurableObject

NAMES = ("renew", "tick", "report")


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
        await self.probe.alarm_run(info)

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
