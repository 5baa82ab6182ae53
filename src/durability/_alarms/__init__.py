"""Named alarms: `DurabilityAlarms`, one-shot and recurring, on the object's one alarm.

`alarms` is the capability, `handle` the per-name `NamedAlarm`, `rows` the SQL and state
of `durability_alarms`, `recurrence` the slots of `every`/`cron` and their catch-up,
`slots` moving a recurrence from slot to slot, `schema` the table's migrations.
"""

from __future__ import annotations

from .alarms import DurabilityAlarms, DurableAlarmInfo
from .handle import NamedAlarm
from .recurrence import Recurrence
from .rows import NamedAlarmState
from .schema import NAMED_ALARM_MIGRATIONS

__all__ = [
    "NAMED_ALARM_MIGRATIONS",
    "DurabilityAlarms",
    "DurableAlarmInfo",
    "NamedAlarm",
    "NamedAlarmState",
    "Recurrence",
]
