"""`SchedulerOptions`: how one scheduler paces its alarm passes, validated once.

There is one way an object's scheduler gets its options: a `SchedulerOptions` value
built from the options given by name, by `scheduler_options` (the mapping a helper
given `context=` collects from its keywords, typed by `SchedulerOptionArgs`, or a
`Durable` class's `scheduler_options`) or by `DurabilityScheduler`'s own keywords. The
defaults and the rules live here only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, TypedDict

from .._errors import SerializedError
from .._validate import check_callable, check_int, check_positive_int

DEFAULT_ALARM_CONCURRENCY = 10
DEFAULT_ALARM_MIN_DELAY_MS = 15_000
DEFAULT_ALARM_HANDOFF_MS = 840_000
MIN_ALARM_DELAY_MS = 1_000
MAX_ALARM_DELAY_MS = 15_000


@dataclass(frozen=True, kw_only=True, slots=True)
class AlarmRetryInfo:
    """What `on_alarm_retry` receives after a failed alarm pass armed its own retry.

    `retry_count` and `is_retry` come from the host's invocation info when it had one;
    `object_id` is the string form of `ctx.id` when the context has an id.
    """

    error: SerializedError
    retry_in_ms: int
    retry_count: int | None = None
    is_retry: bool | None = None
    object_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class SchedulerOptions:
    """The options of one scheduler; a bad value raises at construction.

    `alarm_concurrency` (default 10): permits shared by every attempt of the scheduler.
    `alarm_min_delay_ms` (default 15,000, within 1,000..15,000): the physical alarm is
    never armed sooner than this after a commit. `alarm_handoff_ms` (default 840,000): a
    pass still running after this re-arms the alarm and returns, leaving its work
    running. `live_timers` (default False): the in-memory timer also serves work due
    later than the min delay, and skips keys already running. `on_alarm_retry` (default
    `None`): called with an `AlarmRetryInfo` after a failed pass armed its own retry.
    """

    alarm_concurrency: int = DEFAULT_ALARM_CONCURRENCY
    alarm_min_delay_ms: int = DEFAULT_ALARM_MIN_DELAY_MS
    alarm_handoff_ms: int = DEFAULT_ALARM_HANDOFF_MS
    live_timers: bool = False
    on_alarm_retry: Callable[[AlarmRetryInfo], Any] | None = None

    def __post_init__(self) -> None:
        if self.on_alarm_retry is not None:
            check_callable("on_alarm_retry", self.on_alarm_retry)
        check_positive_int("alarm_concurrency", self.alarm_concurrency)
        min_delay = check_int("alarm_min_delay_ms", self.alarm_min_delay_ms)
        if not MIN_ALARM_DELAY_MS <= min_delay <= MAX_ALARM_DELAY_MS:
            raise ValueError(
                f"alarm_min_delay_ms must be between {MIN_ALARM_DELAY_MS} and {MAX_ALARM_DELAY_MS}"
            )
        check_positive_int("alarm_handoff_ms", self.alarm_handoff_ms)
        if not isinstance(self.live_timers, bool):
            raise TypeError(f"live_timers must be a bool, got {type(self.live_timers).__name__}")


class SchedulerOptionArgs(TypedDict, total=False):
    """The scheduler options a helper given `context=` accepts as keywords (see
    `SchedulerOptions` for each one's meaning and default)."""

    alarm_concurrency: int
    alarm_min_delay_ms: int
    alarm_handoff_ms: int
    live_timers: bool
    on_alarm_retry: Callable[[AlarmRetryInfo], Any] | None


OPTION_NAMES = tuple(option.name for option in fields(SchedulerOptions))


def options_of(given: object, where: str = "") -> SchedulerOptions:
    """The `SchedulerOptions` of the options `given` by name (a mapping; a `None` value
    counts as not given), validated: `TypeError` for an unknown name (naming `where` it
    came from, if given) or a value of the wrong type, `ValueError` for a bad value."""
    if not isinstance(given, Mapping):
        raise TypeError(f"scheduler_options must be a mapping, got {type(given).__name__}")
    for name in given:
        if name not in OPTION_NAMES:
            raise TypeError(f"unknown scheduler option {name}{where}")
    return SchedulerOptions(**given_options(given))


def given_options(given: Mapping[str, Any]) -> dict[str, Any]:
    """The options of `given` whose value is not `None` (`None` means "not given")."""
    return {name: value for name, value in given.items() if value is not None}
