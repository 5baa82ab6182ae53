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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Unpack

from .._clock import now_ms
from .._context import Context, SqlStorage
from .._engine import (
    DEFAULT_ATTEMPT_TIMEOUT_MS,
    SHARED_EVENT_TYPES,
    AlarmMethodOptions,
    Attempt,
    AttemptPolicy,
    CancelledEvent,
    Done,
    DurabilityScheduler,
    DurableHelper,
    Engine,
    HostAlarmInfo,
    LifecycleEventType,
    LifecycleHook,
    RecordExecutor,
    RetryPolicy,
    ScheduledEvent,
    SchedulerOptionArgs,
    check_handlers,
)
from .._errors import DurableAlarmTimeoutError, DurableCancelledError
from .._serialization import deserialize, serialize
from .._signal import AbortSignal, abort
from .._types import JsonValue
from .._uuid import random_uuid
from .._validate import to_epoch_ms
from .handle import NamedAlarm
from .recurrence import Recurrence, RecurrenceSlot, first_cron_slot, first_every_slot, next_slot
from .recurrence import cron as cron_recurrence
from .recurrence import every as every_recurrence
from .recurrence import loaded as loaded_recurrence
from .rows import (
    ALARMS,
    RECURRENCE_COLUMNS,
    NamedAlarmState,
    delete_pending,
    read_states,
    upsert,
)
from .schema import NAMED_ALARM_MIGRATIONS
from .slots import SlotMover

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
        + ", spared, claim_alone, interruptions"
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
        **scheduler_options: Unpack[SchedulerOptionArgs],
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
            options=scheduler_options,
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
        self, name: str, slot: RecurrenceSlot | int, payload: object, recurrence: Recurrence | None
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

    def _moved(self, name: str, generation: str, slot: RecurrenceSlot, now: int) -> None:
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

    def _new_executor(self) -> _AlarmExecutor:
        return _AlarmExecutor(self)

    def _due_attempt(self, row: tuple[Any, ...], info: HostAlarmInfo | None) -> Attempt:
        name, generation, scheduled_at, created_at, attempt, payload_text, occurrence = row[:7]
        due = _Due(
            RecurrenceSlot(int(scheduled_at), 0 if occurrence is None else int(occurrence)),
            None if occurrence is None else int(occurrence),
            payload_text,
            loaded_recurrence(*row[7:12]),
            info,
        )
        kind = self._kinds.get(name) or self._kind_of(name)
        return Attempt(
            kind,
            name,
            generation,
            int(created_at),
            int(attempt),
            due,
            None,
            row[13],
            row[14],
            row[12],
        )

    def _is_terminal(self, error: BaseException, policy: AttemptPolicy) -> bool:
        """A timed-out occurrence may have had its effect: terminal unless `retry_timeouts`."""
        return isinstance(error, DurableAlarmTimeoutError) and not policy.retry_timeouts


class _Due:
    """What an attempt of a named alarm needs of its row (an `Attempt`'s `data`): the
    slot, its occurrence number (`None` for a one-shot), the payload text, the
    recurrence, and the host's alarm info of the pass."""

    __slots__ = ("info", "occurrence", "payload_text", "recurrence", "slot")

    def __init__(
        self,
        slot: RecurrenceSlot,
        occurrence: int | None,
        payload_text: str | None,
        recurrence: Recurrence | None,
        info: HostAlarmInfo | None,
    ) -> None:
        self.slot = slot
        self.occurrence = occurrence
        self.payload_text = payload_text
        self.recurrence = recurrence
        self.info = info


class _AlarmExecutor(RecordExecutor):
    """Runs named-alarm occurrences: the handler gets a `DurableAlarmInfo`; a success
    deletes the occurrence, or moves a recurrence to its next slot (as a terminal
    failure does too)."""

    __slots__ = ("_owner",)

    def __init__(self, owner: DurabilityAlarms) -> None:
        self._owner = owner

    def invoke(self, attempt: Attempt, number: int, signal: AbortSignal) -> Any:
        owner, name, due = self._owner, attempt.key, attempt.data
        handler = owner._handlers.get(name)
        if handler is None:
            raise owner._no_handler(name)
        text = due.payload_text
        return handler(
            DurableAlarmInfo(
                name=name,
                scheduled_time=due.slot.at,
                attempt=number,
                is_retry=number > 1,
                retry_count=number - 1,
                idempotency_key=IDEMPOTENCY_PREFIX + attempt.generation,
                signal=signal,
                platform=due.info,
                payload=None if text is None else deserialize(text),
                occurrence=due.occurrence,
            )
        )

    def complete(self, engine: Engine, done: Sequence[Done]) -> list[int | Exception | None]:
        # A savepoint: a recurrence's move to its next slot may take several statements.
        return engine.transaction_sync(
            lambda sql: [self._complete_one(sql, attempt, number) for attempt, number, _ in done]
        )

    def _complete_one(self, sql: SqlStorage, attempt: Attempt, number: int) -> int | None:
        due = attempt.data
        name, generation = attempt.key, attempt.generation
        if due.recurrence is not None:
            moved = self._owner._slots.advance(
                sql, name, generation, due.recurrence, due.slot, "pending", number
            )
            return now_ms() if moved else None
        deleted = sql.exec(
            "DELETE FROM durability_alarms WHERE name = ? AND generation_id = ? "
            "AND status = 'pending' AND attempt = ?",
            name,
            generation,
            number,
        ).rows_written
        return now_ms() if deleted else None

    def on_terminal(self, sql: SqlStorage, attempt: Attempt) -> None:
        due = attempt.data
        if due.recurrence is not None:
            self._owner._slots.advance(
                sql, attempt.key, attempt.generation, due.recurrence, due.slot, "failed", None
            )

    def is_terminal(self, error: BaseException, policy: AttemptPolicy) -> bool:
        return self._owner._is_terminal(error, policy)
