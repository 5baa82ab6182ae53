"""`DurabilityAlarms`: named logical alarms sharing the object's one physical alarm.

`await alarms.<name>(scheduled_time, payload=None)` persists the occurrence (replacing any
previous one of that name, whatever its state) and returns; the handler gets the JSON
`payload` back in its `DurableAlarmInfo`. Each occurrence has a generation; its
`idempotency_key` is stable across its retries and new for every schedule, so a handler
that passes it to an idempotent receiver cannot double an effect. A success deletes only
the occurrence that ran; a failure keeps the row until it is rescheduled or purged.

`every` and `cron` make a name recur: its row moves from slot to slot (each slot a new
generation), on success and on a terminal failure alike, and a due pass first applies
the catch-up policy to a recurrence that missed slots. `cancel` removes the name's
pending occurrence and its recurrence; `get` and `pending` read the stored state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ._alarm_handle import NamedAlarm
from ._alarm_rows import (
    ALARMS,
    RECURRENCE_COLUMNS,
    NamedAlarmState,
    delete_pending,
    read_states,
    upsert,
)
from ._alarm_slots import SlotMover
from ._clock import now_ms
from ._context import Context, SqlStorage
from ._engine import (
    DEFAULT_ATTEMPT_TIMEOUT_MS,
    NAMED_ALARM_MIGRATIONS,
    SHARED_EVENT_TYPES,
    AlarmMethodOptions,
    AlarmRetryInfo,
    AttemptPolicy,
    CancelledEvent,
    DurabilityScheduler,
    DurableHelper,
    ExecutionSpec,
    HostAlarmInfo,
    LifecycleEventType,
    LifecycleHook,
    RetryPolicy,
    ScheduledEvent,
    check_handlers,
    given_options,
)
from ._errors import DurableAlarmTimeoutError, DurableCancelledError
from ._recurrence import Recurrence, Slot, first_cron_slot, first_every_slot, next_slot
from ._recurrence import cron as cron_recurrence
from ._recurrence import every as every_recurrence
from ._recurrence import loaded as loaded_recurrence
from ._serialization import deserialize, serialize
from ._signal import AbortSignal, abort
from ._types import JsonValue
from ._uuid import random_uuid
from ._validate import to_epoch_ms

__all__ = ["DurabilityAlarms", "DurableAlarmInfo", "NamedAlarm"]

CAPABILITY = "namedAlarms"
IDEMPOTENCY_PREFIX = "durability-alarm:v1:"
DEFAULT_RETRIES = RetryPolicy()


@dataclass(frozen=True, kw_only=True, slots=True)
class DurableAlarmInfo:
    """What a named-alarm handler receives.

    `idempotency_key` is stable across the retries of one occurrence and new for every
    schedule; `platform` is the host's alarm invocation info for passes driven by the
    physical alarm (`None` when the in-memory timer started the pass). `payload` is the
    JSON value given when the occurrence was scheduled (else `None`); `occurrence`
    numbers the slots of a recurrence from 0 and is `None` for a one-shot.
    """

    name: str
    scheduled_time: int
    attempt: int
    is_retry: bool
    retry_count: int
    idempotency_key: str
    signal: AbortSignal
    platform: HostAlarmInfo | None
    payload: JsonValue
    occurrence: int | None


class DurabilityAlarms(DurableHelper[NamedAlarm]):
    """Named alarms: `await alarms.<handler>(scheduled_time)` schedules (or replaces) one.

    Construct it in the object's `__init__` with `scheduler=` or `context=` (the
    object's scheduler, built with the scheduler options given here if it has none yet).
    """

    _kind = "DurabilityAlarms"
    _capability = CAPABILITY
    _migrations = NAMED_ALARM_MIGRATIONS
    _table = ALARMS
    _entity_kind = "named_alarm"
    _noun = "named alarm"
    _missing = 'No named alarm handler registered for "{}"'
    _purge_reason = "Durable alarm was purged"
    _timeout_error = DurableAlarmTimeoutError
    _due_columns = (
        "name, generation_id, scheduled_at, created_at, attempt, payload, occurrence, "
        + RECURRENCE_COLUMNS
    )
    _emitted = frozenset({LifecycleEventType.SCHEDULED, *SHARED_EVENT_TYPES})
    _one_per_key = True

    def __init__(
        self,
        *,
        handlers: Mapping[str, Callable[[DurableAlarmInfo], Any]],
        scheduler: DurabilityScheduler | None = None,
        context: Context | None = None,
        attempt_timeout_ms: int = DEFAULT_ATTEMPT_TIMEOUT_MS,
        retries: RetryPolicy = DEFAULT_RETRIES,
        methods: Mapping[str, AlarmMethodOptions] | None = None,
        on_lifecycle_event: LifecycleHook | None = None,
        lifecycle_events: Iterable[str] | None = None,
        alarm_concurrency: int | None = None,
        alarm_min_delay_ms: int | None = None,
        alarm_handoff_ms: int | None = None,
        live_timers: bool | None = None,
        on_alarm_retry: Callable[[AlarmRetryInfo], Any] | None = None,
    ) -> None:
        super().__init__(
            check_handlers(handlers, DurabilityAlarms),
            scheduler=scheduler,
            context=context,
            attempt_timeout_ms=attempt_timeout_ms,
            retries=retries,
            methods=methods,
            options_type=AlarmMethodOptions,
            on_lifecycle_event=on_lifecycle_event,
            lifecycle_events=lifecycle_events,
            options=given_options(locals()),
        )
        self._slots = SlotMover(self._engine, self._moved)

    def named(self, name: str) -> NamedAlarm:
        """The alarm object of handler `name` (the one attribute access returns)."""
        return self._entry(name)

    async def pending(self) -> list[NamedAlarmState]:
        """Every pending (or running) named alarm, earliest next attempt first."""
        return read_states(self._engine.sql, None, self._running_generations())

    # -- internals ----------------------------------------------------------------------

    def _new_entry(self, name: str) -> NamedAlarm:
        return NamedAlarm(self, name)

    async def _schedule(
        self, name: str, slot: Slot | int, payload: object, recurrence: Recurrence | None
    ) -> None:
        """Store `name`'s occurrence at `slot` (a time for a one-shot), replacing any."""
        text = None if payload is None else serialize(payload, "payload")
        now = now_ms()
        generation = random_uuid()
        await self._engine.transaction(
            lambda sql: upsert(sql, name, generation, slot, now, text, recurrence)
        )
        if LifecycleEventType.SCHEDULED in self._listened:
            at, occurrence = (slot, None) if isinstance(slot, int) else (slot.at, slot.occurrence)
            self._emit(
                ScheduledEvent(
                    alarm=name,
                    id=name,
                    generation=generation,
                    timestamp=now,
                    scheduled_time=at,
                    occurrence=occurrence,
                )
            )

    async def _every(
        self,
        name: str,
        interval_ms: object,
        start_at: object,
        catch_up_policy: object,
        payload: object,
    ) -> None:
        recurrence = every_recurrence(interval_ms, catch_up_policy)
        start = None if start_at is None else to_epoch_ms("start_at", start_at)
        slot = first_every_slot(recurrence, start, now_ms())
        await self._schedule(name, slot, payload, recurrence)

    async def _cron(
        self, name: str, expression: object, tz: object, catch_up_policy: object, payload: object
    ) -> None:
        recurrence = cron_recurrence(expression, tz, catch_up_policy)
        slot = first_cron_slot(recurrence, now_ms())
        next_slot(recurrence, slot)  # ValueError naming the expression if it has none
        await self._schedule(name, slot, payload, recurrence)

    async def _cancel(self, name: str) -> bool:
        removed = await self._engine.transaction(lambda sql: delete_pending(sql, name))
        if removed is None:
            return False
        generation, attempt = removed
        active = self._active.get(name)
        signal = None if active is None else active.signal
        if signal is not None:
            abort(signal, DurableCancelledError(alarm=name))
        if LifecycleEventType.CANCELLED in self._listened:
            self._emit(
                CancelledEvent(
                    entity_kind="named_alarm",
                    alarm=name,
                    id=name,
                    generation=generation,
                    timestamp=now_ms(),
                    attempt=attempt,
                    running=signal is not None,
                )
            )
        return True

    async def _get(self, name: str) -> NamedAlarmState | None:
        states = read_states(self._engine.sql, name, self._running_generations())
        return states[0] if states else None

    def _running_generations(self) -> dict[str, str]:
        """The generation of each name with an attempt running here."""
        return {
            name: execution.generation
            for name, execution in self._active.items()
            if execution.signal is not None and not execution.is_settled
        }

    def _moved(self, name: str, generation: str, slot: Slot, now: int) -> None:
        """Tell the hook that a recurrence moved to `slot` (after the write that did it)."""
        if LifecycleEventType.SCHEDULED in self._listened:
            event = ScheduledEvent(
                alarm=name,
                id=name,
                generation=generation,
                timestamp=now,
                scheduled_time=slot.at,
                occurrence=slot.occurrence,
            )
            asyncio.get_running_loop().call_soon(self._emit, event)

    async def _catch_up(self, rows: list[tuple[Any, ...]], now: int) -> list[tuple[Any, ...]]:
        """Recurrences whose next slot is due too move per their catch-up policy."""
        return await self._slots.catch_up(rows, now)

    def _due_spec(self, row: tuple[Any, ...], info: HostAlarmInfo | None) -> ExecutionSpec:
        name, generation, scheduled_at, created_at, attempt, payload_text, occurrence = row[:7]
        recurrence = loaded_recurrence(*row[7:12])
        scheduled_time = int(scheduled_at)

        def argument(attempt: int, signal: AbortSignal) -> DurableAlarmInfo:
            return DurableAlarmInfo(
                name=name,
                scheduled_time=scheduled_time,
                attempt=attempt,
                is_retry=attempt > 1,
                retry_count=attempt - 1,
                idempotency_key=IDEMPOTENCY_PREFIX + generation,
                signal=signal,
                platform=info,
                payload=None if payload_text is None else deserialize(payload_text),
                occurrence=None if occurrence is None else int(occurrence),
            )

        def complete(sql: SqlStorage, result: Any, attempt: int) -> int | None:
            if recurrence is not None:
                done = self._slots.advance(
                    sql, name, generation, recurrence, slot, "pending", attempt
                )
                return now_ms() if done else None
            deleted = sql.exec(
                "DELETE FROM durability_alarms WHERE name = ? AND generation_id = ? "
                "AND status = 'pending' AND attempt = ?",
                name,
                generation,
                attempt,
            ).rows_written
            return now_ms() if deleted else None

        def on_terminal(sql: SqlStorage) -> None:
            if recurrence is not None:
                self._slots.advance(sql, name, generation, recurrence, slot, "failed", None)

        slot = Slot(scheduled_time, 0 if occurrence is None else int(occurrence))
        return self._spec(
            key=name,
            name=name,
            generation=generation,
            created_at=int(created_at),
            attempt=int(attempt),
            argument=argument,
            complete=complete,
            on_terminal=on_terminal,
        )

    def _is_terminal(self, error: BaseException, policy: AttemptPolicy) -> bool:
        """A timed-out occurrence may have had its effect: terminal unless `retry_timeouts`."""
        return isinstance(error, DurableAlarmTimeoutError) and not policy.retry_timeouts
