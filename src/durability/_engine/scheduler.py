"""`DurabilityScheduler`, the public handle on an engine, and how helpers attach to one.

A helper attaches with `scheduler=` (the shared engine) or `context=` (a private engine
built with the scheduler options the helper was given) and claims its kind: one helper
of a kind per scheduler. Helpers with due work use the whole engine; a helper without
(the log) attaches for the object's storage only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._cloudflare import alarm_info, as_context
from .._context import Context, Storage
from .engine import Engine
from .migrations import Migration
from .options import (
    DEFAULT_ALARM_CONCURRENCY,
    DEFAULT_ALARM_HANDOFF_MS,
    DEFAULT_ALARM_MIN_DELAY_MS,
    OPTION_NAMES,
    AlarmRetryInfo,
    SchedulerOptions,
)
from .participants import HostAlarmInfo


class DurabilityScheduler:
    """One per object when several helpers share its alarm, storage and permits.

    Pass it as `scheduler=` to every helper and delegate the object's `alarm()` to
    `scheduler.alarm(info)`. Construct it, and every helper, eagerly in the object's
    `__init__`: only helpers built in the current instance are consulted by a pass.
    """

    __slots__ = ("_engine",)

    def __init__(
        self,
        *,
        context: Context,
        alarm_concurrency: int = DEFAULT_ALARM_CONCURRENCY,
        alarm_min_delay_ms: int = DEFAULT_ALARM_MIN_DELAY_MS,
        alarm_handoff_ms: int = DEFAULT_ALARM_HANDOFF_MS,
        live_timers: bool = False,
        on_alarm_retry: Callable[[AlarmRetryInfo], Any] | None = None,
    ) -> None:
        options = SchedulerOptions(
            alarm_concurrency=alarm_concurrency,
            alarm_min_delay_ms=alarm_min_delay_ms,
            alarm_handoff_ms=alarm_handoff_ms,
            live_timers=live_timers,
            on_alarm_retry=on_alarm_retry,
        )
        self._engine = Engine(as_context(context), options)

    async def alarm(self, info: HostAlarmInfo | None = None) -> None:
        """Run due work of every attached helper and re-arm the physical alarm."""
        await self._engine.alarm(alarm_info(info))


def attach(
    *,
    scheduler: DurabilityScheduler | None,
    context: Context | None,
    kind: str,
    options: Mapping[str, Any],
) -> Engine:
    """The engine a helper of `kind` uses: the shared one of `scheduler`, or a private one.

    Exactly one of `scheduler` and `context` must be given; the scheduler `options` the
    helper was given (by name) are only accepted with `context`. Claims `kind` on the
    engine (one helper per kind).
    """
    unknown = sorted(set(options) - set(OPTION_NAMES))
    if unknown:
        raise TypeError(f"unknown scheduler option {unknown[0]}")
    if scheduler is not None and context is not None:
        raise ValueError("pass either scheduler= or context=, not both")
    if scheduler is not None:
        if not isinstance(scheduler, DurabilityScheduler):
            raise TypeError(
                f"scheduler must be a DurabilityScheduler, got {type(scheduler).__name__}"
            )
        if options:
            name = sorted(options)[0]
            raise ValueError(f"{name} can only be given with context= (set it on the scheduler)")
        engine = scheduler._engine
    elif context is not None:
        engine = Engine(as_context(context), SchedulerOptions(**options))
    else:
        raise TypeError("either scheduler= or context= is required")
    engine.claim_kind(kind)
    return engine


def attach_storage(
    *,
    scheduler: DurabilityScheduler | None,
    context: Context | None,
    kind: str,
    schemas: Mapping[str, Sequence[Migration]],
) -> Storage:
    """The object's storage for a helper of `kind` with no due work (it never sets the alarm).

    Attaches like `attach` without scheduler options, then brings each capability's
    schema in `schemas` up to date.
    """
    engine = attach(scheduler=scheduler, context=context, kind=kind, options={})
    for capability, migrations in schemas.items():
        engine.migrate_schema(capability, migrations)
    return engine.storage
