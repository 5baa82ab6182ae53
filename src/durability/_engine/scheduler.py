"""`DurabilityScheduler`, the public handle on an engine, and how helpers attach to one.

An object has one scheduler: the first `DurabilityScheduler(context=ctx)`, or the first
helper given `context=ctx`, registers itself for that `ctx`, and later helpers given the
same `context=` attach to it, so two helpers can never each own the object's one alarm.
A helper attaches with `scheduler=` or `context=` and claims its kind: one helper of a
kind per scheduler. Helpers with due work use the whole engine; a helper without (the
log) attaches for the object's storage only.

`_SCHEDULERS` (the scheduler of each `ctx`) holds them weakly, keyed by the identity
of the `ctx` they were built on (a `ctx` need not accept attributes or weak
references): it never keeps an object alive, and an entry goes with its scheduler. A
scheduler holds its `ctx`, so while an entry exists its key cannot be reused by
another object.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._context import Context, alarm_info, as_context, host_ctx
from .engine import Engine
from .migrations import Migration
from .options import (
    DEFAULT_ALARM_CONCURRENCY,
    DEFAULT_ALARM_HANDOFF_MS,
    DEFAULT_ALARM_MIN_DELAY_MS,
    AlarmRetryInfo,
    SchedulerOptions,
    given_options,
    options_of,
)
from .participants import HostAlarmInfo


class DurabilityScheduler:
    """The one owner of an object's alarm, storage transactions and permits.

    Pass it as `scheduler=` to every helper (or give every helper the same `context=`)
    and delegate the object's `alarm()` to `scheduler.alarm(info)`. Construct it, and
    every helper, eagerly in the object's `__init__`: only helpers built in the current
    instance are consulted by a pass. A second one for the same `ctx` raises
    `ValueError`.
    """

    __slots__ = ("__weakref__", "_ctx", "_engine")

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
        if DurabilityScheduler.of(context) is not None:
            raise ValueError(
                "this object already has a DurabilityScheduler (the first one built with "
                "this context, or by a helper given context=); pass scheduler= to share it "
                "(DurabilityScheduler.of(ctx) returns it)"
            )
        self._start(context, options)

    def _start(self, context: Context, options: SchedulerOptions) -> None:
        """Build the engine and register this scheduler as the object's own."""
        self._engine = Engine(as_context(context), options)
        self._engine.handle = self
        self._ctx = host_ctx(context)
        _SCHEDULERS[id(self._ctx)] = self

    def _release(self) -> None:
        """Stop being the object's scheduler (its object failed to construct)."""
        if _SCHEDULERS.get(id(self._ctx)) is self:
            del _SCHEDULERS[id(self._ctx)]

    @classmethod
    def _for(cls, context: Context, options: SchedulerOptions) -> DurabilityScheduler:
        """The object's scheduler: the registered one, else a new one with `options`."""
        found = cls.of(context)
        if found is None:
            found = cls.__new__(cls)
            found._start(context, options)
        return found

    @staticmethod
    def of(ctx: object) -> DurabilityScheduler | None:
        """The scheduler of the object whose `ctx` this is, or `None` before there is one."""
        key = host_ctx(ctx)
        found = _SCHEDULERS.get(id(key))
        if found is None or found._ctx is not key:
            return None
        return found

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
    """The engine a helper of `kind` uses: that of `scheduler`, or of the object's
    scheduler for `context` (built with `options` when the object has none yet).

    Exactly one of `scheduler` and `context` must be given; the scheduler `options` the
    helper was given (by name) are only accepted with `context`, and must equal those of
    an existing scheduler. Claims `kind` on the engine (one helper per kind).
    """
    wanted = options_of(options)
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
        engine = object_scheduler(context, given_options(options), wanted)._engine
    else:
        raise TypeError("either scheduler= or context= is required")
    engine.claim_kind(kind)
    return engine


def object_scheduler(
    context: Context, options: Mapping[str, Any], wanted: SchedulerOptions | None = None
) -> DurabilityScheduler:
    """The object's scheduler for `context`: the existing one, whose options must equal
    the `options` given (`ValueError` otherwise), else a new one built with them
    (`wanted`: those options, validated already)."""
    if wanted is None:
        wanted = options_of(options)
    scheduler = DurabilityScheduler._for(context, wanted)
    _check_same_options(scheduler._engine.options, wanted, options)
    return scheduler


def _check_same_options(
    own: SchedulerOptions, wanted: SchedulerOptions, given: Mapping[str, Any]
) -> None:
    """`ValueError` when an option a helper was given differs from its scheduler's."""
    for name in sorted(given):
        if getattr(own, name) != getattr(wanted, name):
            raise ValueError(
                f"{name} differs from the object's scheduler ({getattr(own, name)!r}); "
                "the object's helpers share one scheduler: give its options once"
            )


_SCHEDULERS: weakref.WeakValueDictionary[int, DurabilityScheduler] = weakref.WeakValueDictionary()
"""Each object's scheduler, by `id(ctx)` (see the module docstring)."""


def attach_storage(
    *,
    scheduler: DurabilityScheduler | None,
    context: Context | None,
    kind: str,
    schemas: Mapping[str, Sequence[Migration]],
    options: Mapping[str, Any],
) -> Engine:
    """The engine of a helper of `kind` with no due work, which uses only its `storage`
    (it never sets the alarm) and holds it to keep its place on the object's scheduler.

    Attaches like `attach` (the scheduler `options` build the object's scheduler when
    this helper is the first given `context=`), then brings each capability's schema in
    `schemas` up to date.
    """
    engine = attach(scheduler=scheduler, context=context, kind=kind, options=options)
    for capability, migrations in schemas.items():
        engine.migrate_schema(capability, migrations)
    return engine
