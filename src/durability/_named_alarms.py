"""`DurabilityAlarms`: named logical alarms sharing the object's one physical alarm.

`await alarms.<name>(scheduled_time, payload=None)` persists the occurrence (replacing any
previous one of that name, whatever its state) and returns; the handler gets the JSON
`payload` back in its `DurableAlarmInfo`. Each occurrence has a generation; its
`idempotency_key` is stable across its retries and new for every schedule, so a handler
that passes it to an idempotent receiver cannot double an effect. A success deletes only
the occurrence that ran; a failure keeps the row until it is rescheduled or purged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._clock import now_ms
from ._context import Context, SqlStorage
from ._engine import (
    DEFAULT_ATTEMPT_TIMEOUT_MS,
    NAMED_ALARM_MIGRATIONS,
    AlarmMethodOptions,
    AlarmRetryInfo,
    AttemptPolicy,
    DurabilityScheduler,
    DurableHelper,
    ExecutionSpec,
    HandlerEntry,
    HostAlarmInfo,
    LifecycleHook,
    RetryPolicy,
    ScheduledEvent,
    TableSpec,
    check_handlers,
    given_options,
)
from ._errors import DurableAlarmTimeoutError
from ._serialization import deserialize, serialize
from ._signal import AbortSignal
from ._types import JsonValue, TimeInput
from ._uuid import random_uuid
from ._validate import to_epoch_ms

ALARMS = TableSpec("durability_alarms", "name")
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


class DurabilityAlarms(DurableHelper["NamedAlarm"]):
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
    _due_columns = "name, generation_id, scheduled_at, created_at, attempt, payload, occurrence"
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
            options=given_options(locals()),
        )

    def named(self, name: str) -> NamedAlarm:
        """The alarm object of handler `name` (the one attribute access returns)."""
        return self._entry(name)

    # -- internals ----------------------------------------------------------------------

    def _new_entry(self, name: str) -> NamedAlarm:
        return NamedAlarm(self, name)

    async def _schedule(self, name: str, scheduled_time: object, payload: object) -> None:
        at = to_epoch_ms("scheduled_time", scheduled_time)
        text = None if payload is None else serialize(payload, "payload")
        now = now_ms()
        generation = random_uuid()

        def write(sql: SqlStorage) -> None:
            sql.exec(
                "INSERT INTO durability_alarms (name, generation_id, status, scheduled_at, "
                "next_attempt_at, attempt, last_error, last_error_name, created_at, payload, "
                "occurrence) VALUES (?, ?, 'pending', ?, ?, 0, NULL, NULL, ?, ?, NULL) "
                "ON CONFLICT(name) DO UPDATE SET generation_id = excluded.generation_id, "
                "status = 'pending', scheduled_at = excluded.scheduled_at, "
                "next_attempt_at = excluded.next_attempt_at, attempt = 0, last_error = NULL, "
                "last_error_name = NULL, created_at = excluded.created_at, "
                "payload = excluded.payload, occurrence = NULL",
                name,
                generation,
                at,
                at,
                now,
                text,
            )

        await self._engine.transaction(write)
        if self._events:
            self._emit(
                ScheduledEvent(
                    alarm=name, id=name, generation=generation, timestamp=now, scheduled_time=at
                )
            )

    def _due_spec(self, row: tuple[Any, ...], info: HostAlarmInfo | None) -> ExecutionSpec:
        name, generation, scheduled_at, created_at, attempt, payload_text, occurrence = row
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
            deleted = sql.exec(
                "DELETE FROM durability_alarms WHERE name = ? AND generation_id = ? "
                "AND status = 'pending' AND attempt = ?",
                name,
                generation,
                attempt,
            ).rows_written
            return now_ms() if deleted else None

        return self._spec(
            key=name,
            name=name,
            generation=generation,
            created_at=int(created_at),
            attempt=int(attempt),
            argument=argument,
            complete=complete,
        )

    def _is_terminal(self, error: BaseException, policy: AttemptPolicy) -> bool:
        """A timed-out occurrence may have had its effect: terminal unless `retry_timeouts`."""
        return isinstance(error, DurableAlarmTimeoutError) and not policy.retry_timeouts


class NamedAlarm(HandlerEntry[DurabilityAlarms]):
    """One named alarm of a `DurabilityAlarms`: call it with a time to schedule it."""

    __slots__ = ()

    async def __call__(self, scheduled_time: TimeInput, payload: JsonValue = None) -> None:
        """Schedule the occurrence at `scheduled_time` (ms or aware datetime), replacing any;
        its handler gets `payload` (a JSON value) as `info.payload`."""
        await self._owner._schedule(self.name, scheduled_time, payload)
