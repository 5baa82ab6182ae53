"""`Durability`: durable operations registered by id and run at least once.

Registering writes the record and arms the alarm in one transaction and returns only
then; the handler runs later (if the record is due and a permit is free, the same
transaction claims it and the handler starts right after that commit). An id belongs to one
operation forever (until purged): registering it again is a silent no-op, and using it
for another operation raises `DuplicateDurableCallError`. Completion records are kept so
ids stay deduplicated; `purge_before` is the only way to drop them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Unpack

from .._clock import now_ms
from .._context import Context, Row
from .._engine import (
    DEFAULT_ATTEMPT_TIMEOUT_MS,
    QUEUED_CLAIM,
    SHARED_EVENT_TYPES,
    Attempt,
    AttemptKind,
    AttemptPolicy,
    CancelledEvent,
    DurabilityScheduler,
    DurableHelper,
    HostAlarmInfo,
    LifecycleEventType,
    LifecycleHook,
    MethodOptions,
    RegisteredEvent,
    RetriedEvent,
    RetryPolicy,
    SchedulerOptionArgs,
    check_handlers,
)
from .._errors import (
    DurableAttemptTimeoutError,
    DurableCancelledError,
    DurableResultSerializationError,
    serialize_error,
)
from .._serialization import serialize
from .._signal import abort
from .._uuid import fresh_generation, random_uuid
from .._validate import check_non_negative_int
from .calls import CallExecutor, DurableCall, call_idempotency_key
from .control import (
    NULL_TEXT,
    cancel_call,
    check_id,
    first_attempt_at,
    retry_call,
)
from .handles import DurableOperation
from .inserts import Registration
from .records import (
    CALLS,
    OperationResult,
    completed_result,
    list_results,
    read_call,
    success_of,
    to_result,
)
from .registrations import Registrations
from .schema import OPERATION_MIGRATIONS

CAPABILITY = "operations"
DEFAULT_RETRIES = RetryPolicy()


class Durability(DurableHelper["DurableOperation"]):
    """Durable operations: `await durability.<handler>(id=..., payload=...)` registers one.

    Construct it in the object's `__init__` with `scheduler=` or `context=` (the
    object's scheduler, built with the scheduler options given here if it has none
    yet), and delegate the object's `alarm()` to the scheduler (or to any of its
    helpers).
    """

    _kind = "Durability"
    _capability = CAPABILITY
    _migrations = OPERATION_MIGRATIONS
    _table = CALLS
    _entity_kind = "operation"
    _noun = "operation"
    _missing = 'No handler registered for operation "{}"'
    _purge_reason = "Durable operation was purged"
    _timeout_error = DurableAttemptTimeoutError
    _due_columns = (
        "id, generation_id, operation, payload, created_at, attempt, spared, claim_alone, "
        "interruptions"
    )
    _emitted = frozenset(
        {
            LifecycleEventType.REGISTERED,
            LifecycleEventType.RETRIED,
            *SHARED_EVENT_TYPES,
        }
    )
    _one_per_key = False

    def __init__(
        self,
        *,
        handlers: Mapping[str, Callable[[DurableCall[Any]], Any]],
        scheduler: DurabilityScheduler | None = None,
        context: Context | None = None,
        attempt_timeout_ms: int = DEFAULT_ATTEMPT_TIMEOUT_MS,
        retries: RetryPolicy = DEFAULT_RETRIES,
        methods: Mapping[str, MethodOptions] | None = None,
        on_lifecycle_event: LifecycleHook | None = None,
        lifecycle_events: Iterable[str] | None = None,
        include_result_in_events: bool = False,
        **scheduler_options: Unpack[SchedulerOptionArgs],
    ) -> None:
        super().__init__(
            check_handlers(handlers, Durability),
            scheduler=scheduler,
            context=context,
            attempt_timeout_ms=attempt_timeout_ms,
            retries=retries,
            methods=methods,
            options_type=MethodOptions,
            on_lifecycle_event=on_lifecycle_event,
            lifecycle_events=lifecycle_events,
            include_result_in_events=include_result_in_events,
            options=scheduler_options,
        )
        self._after: dict[tuple[str, str], asyncio.Event] = {}
        """Retried records (by key and generation) whose older attempt must end first."""
        self._registrations = Registrations(
            self._engine,
            kind_of=self._kind_for,
            registered=self._registered,
            start=self._start_eagerly,
            run_started=self._run_started,
        )
        self._prefixes: dict[str, str] = {}

    def operation(self, name: str) -> DurableOperation:
        """The operation object of handler `name` (the one attribute access returns)."""
        return self._entry(name)

    def _new_entry(self, name: str) -> DurableOperation:
        return DurableOperation(self, name)

    # -- internals used by DurableOperation ---------------------------------------------

    def _register(
        self, operation: str, id: object, payload: object, run_at: object, delay_ms: object
    ) -> asyncio.Future[bool]:
        """Check and queue one registration; the future is its outcome once durable.

        Not a coroutine: `DurableOperation.__call__` awaits the future itself, so a
        registration costs one coroutine, not two."""
        key = check_id(id)
        text = NULL_TEXT if payload is None else serialize(payload, "payload")
        now = now_ms()
        due = (
            now if run_at is None and delay_ms is None else first_attempt_at(now, run_at, delay_ms)
        )
        return self._registrations.add((key, operation, text, due, fresh_generation(), now))

    def _registered(self, inserted: list[Registration]) -> None:
        """After the commit of new records: tell the hook."""
        if LifecycleEventType.REGISTERED in self._listened:
            for key, operation, _, _, generation, created_at in inserted:
                self._emit(
                    RegisteredEvent(
                        operation=operation, id=key, generation=generation, timestamp=created_at
                    )
                )

    def _start_eagerly(self, attempts: list[Attempt]) -> None:
        """Run records that are due now at once, as far as permits are free (the
        reconciled alarm or the early timer picks up the others)."""
        started = self._engine.runner.start(attempts)
        if started is not None:
            self._run_started(started, attempts[0].key, attempts[0].kind.name)

    def _run_started(self, started: Awaitable[None], id: str, operation: str) -> None:
        """Run attempts started outside a pass in the background (a failure is reported
        with the `id` and `operation` of the first)."""
        self._engine.tasks.run_in_background(
            started, "durability.background_execution.failed", {"operation": operation, "id": id}
        )

    async def _cancel(self, operation: str, id: object) -> bool:
        key = check_id(id)
        now = now_ms()
        reason = DurableCancelledError(operation, key)
        stored = serialize_error(reason)
        row = await self._engine.transaction(
            lambda sql: cancel_call(sql, operation, key, now, stored)
        )
        if row is None:
            return False
        generation = str(row["generation_id"])
        running = self._active.get(key)
        signal = None if running is None or running.generation != generation else running.signal
        if signal is not None:
            abort(signal, reason)
        self._engine.watchers.notify(CALLS.name, key)
        if LifecycleEventType.CANCELLED in self._listened:
            self._emit(
                CancelledEvent(
                    entity_kind="operation",
                    operation=operation,
                    id=key,
                    generation=generation,
                    timestamp=now,
                    attempt=int(row["attempt"]),
                    running=signal is not None,
                )
            )
        return True

    async def _retry(self, operation: str, id: object) -> bool:
        key = check_id(id)
        now = now_ms()
        generation = random_uuid()
        row = await self._engine.transaction(
            lambda sql: retry_call(sql, operation, key, now, generation),
            due_at=lambda row: None if row is None else now,
        )
        if row is None:
            return False
        if LifecycleEventType.RETRIED in self._listened:
            self._emit(
                RetriedEvent(operation=operation, id=key, generation=generation, timestamp=now)
            )
        # A cancelled attempt whose handler has not ended yet still holds the key here:
        # the new generation starts only after it (the timer or the alarm starts it).
        self._after = {k: done for k, done in self._after.items() if not done.is_set()}
        older = self._active.get(key)
        if older is not None and not older.is_settled:
            self._after[(key, generation)] = older.settled
            return True
        created_at = int(row["created_at"])
        self._start_eagerly(
            [self._call_attempt(key, operation, str(row["payload"]), generation, created_at, 0)]
        )
        return True

    def _list(
        self, operation: str, status: object, limit: object, after: object
    ) -> list[OperationResult]:
        return list_results(self._engine.sql, operation, status=status, limit=limit, after=after)

    def _read(self, operation: str, id: object) -> Row | None:
        return read_call(self._engine.sql, operation, check_id(id))

    def _result(self, operation: str, id: object) -> tuple[OperationResult, Row | None]:
        row = self._read(operation, id)
        if row is None:
            return OperationResult(status="not_found", id=str(id), operation=operation), None
        return to_result(self._engine.sql, row), row

    async def _wait(self, operation: str, id: object, timeout_ms: object) -> OperationResult:
        timeout = check_non_negative_int("timeout_ms", timeout_ms)
        current, row = self._result(operation, id)
        if row is None or current.status != "pending" or timeout == 0:
            return current
        digest = success_of(row["generation_id"])
        success = await self._engine.watchers.settled(CALLS.name, str(id), timeout / 1000, digest)
        if success is None:
            return self._result(operation, id)[0]
        return completed_result(success, current.id, operation)

    # -- execution ----------------------------------------------------------------------

    def _new_executor(self) -> CallExecutor:
        return CallExecutor(self)

    def _due_attempt(self, row: tuple[Any, ...], info: HostAlarmInfo | None) -> Attempt:
        key, generation, operation, payload, created_at, attempt = row[:6]
        call = self._call_attempt(key, operation, payload, generation, created_at, attempt)
        spared, claim, call.interruptions = row[6:]
        if claim == QUEUED_CLAIM:
            call.spared = spared + 1  # claimed ahead of its permit and left: see `Reservation`
        else:
            call.suspect = claim
            call.spared = spared if claim != 0 else spared + 1
        return call

    def _call_attempt(
        self,
        key: str,
        operation: str,
        payload_text: str,
        generation: str,
        created_at: int,
        attempt: int,
    ) -> Attempt:
        """An attempt of record `key`; its `data` is the stored payload text."""
        after = None
        if self._after:
            after = self._after.get((key, generation))
            if after is not None and after.is_set():
                del self._after[(key, generation)]
                after = None
        kind = self._kinds.get(operation) or self._kind_of(operation)
        return Attempt(kind, key, generation, created_at, attempt, payload_text, after)

    def _kind_for(self, operation: str) -> AttemptKind:
        """What every attempt of `operation` shares (a new record's attempt needs no
        `after`: its generation is new)."""
        return self._kinds.get(operation) or self._kind_of(operation)

    def _idempotency_prefix(self, operation: str) -> str:
        """`call_idempotency_key` of `operation` without the id (built once per name)."""
        prefix = self._prefixes.get(operation)
        if prefix is None:
            object_id = self._engine.object_id()
            prefix = self._prefixes[operation] = call_idempotency_key(object_id, operation, "")
        return prefix

    def _is_terminal(self, error: BaseException, policy: AttemptPolicy) -> bool:
        """A result that cannot be stored fails the call: running it again would not help."""
        return isinstance(error, DurableResultSerializationError)
