"""`NamedAlarm`: the handle of one named alarm (`alarms.<name>`, or `self.<name>` on a
`Durable` class), which schedules, recurs, cancels and reads that name's occurrence."""

from __future__ import annotations

from typing import Protocol

from .._engine import HandlerEntry
from .._types import JsonValue, TimeInput
from .._validate import to_epoch_ms
from .recurrence import CatchUp, Recurrence, RecurrenceSlot
from .rows import NamedAlarmState


class AlarmsOwner(Protocol):
    """What a `NamedAlarm` asks of its `DurabilityAlarms`: every read and write of a name."""

    async def _schedule(
        self, name: str, slot: RecurrenceSlot | int, payload: object, recurrence: Recurrence | None
    ) -> None: ...

    async def _every(
        self,
        name: str,
        interval_ms: object,
        start_at: object,
        catch_up_policy: object,
        payload: object,
    ) -> None: ...

    async def _cron(
        self, name: str, expression: object, tz: object, catch_up_policy: object, payload: object
    ) -> None: ...

    async def _cancel(self, name: str) -> bool: ...

    async def _get(self, name: str) -> NamedAlarmState | None: ...


class NamedAlarm(HandlerEntry[AlarmsOwner]):
    """One named alarm of a `DurabilityAlarms`: call it with a time to schedule it, or
    make it recur with `every` or `cron`; `cancel` and `get` control and inspect it."""

    __slots__ = ()

    async def __call__(self, scheduled_time: TimeInput, payload: JsonValue = None) -> None:
        """Schedule the occurrence at `scheduled_time` (ms or aware datetime), replacing any
        occurrence or recurrence; its handler gets `payload` (a JSON value) as `info.payload`."""
        at = to_epoch_ms("scheduled_time", scheduled_time)
        await self._owner._schedule(self.name, at, payload, None)

    async def every(
        self,
        interval_ms: int,
        *,
        start_at: TimeInput | None = None,
        catch_up: CatchUp = "latest",
        payload: JsonValue = None,
    ) -> None:
        """Recur every `interval_ms` from `start_at` (default now: the first slot runs at
        once), replacing any occurrence or recurrence of this name."""
        await self._owner._every(self.name, interval_ms, start_at, catch_up, payload)

    async def cron(
        self,
        expression: str,
        *,
        tz: str = "UTC",
        catch_up: CatchUp = "latest",
        payload: JsonValue = None,
    ) -> None:
        """Recur at the matches of five-field cron `expression` in time zone `tz` (needs
        the `cron` extra), replacing any occurrence or recurrence."""
        await self._owner._cron(self.name, expression, tz, catch_up, payload)

    async def cancel(self) -> bool:
        """Remove the pending occurrence and any recurrence; a running attempt's signal is
        aborted with `DurableCancelledError`. False when nothing was pending."""
        return await self._owner._cancel(self.name)

    async def get(self) -> NamedAlarmState | None:
        """The stored occurrence of this name, or `None` when it has none."""
        return await self._owner._get(self.name)
