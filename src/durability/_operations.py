"""`Durability`: durable operations registered by id and run at least once.

Registering writes the record and arms the alarm in one transaction and returns only
then; the handler runs later (at once if a permit is free). An id belongs to one
operation forever (until purged): registering it again is a silent no-op, and using it
for another operation raises `DuplicateDurableCallError`. Completion records are kept so
ids stay deduplicated; `purge_before` is the only way to drop them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

from ._clock import now_ms
from ._context import Context, Row, SqlStorage
from ._engine import (
    DEFAULT_ATTEMPT_TIMEOUT_MS,
    OPERATION_MIGRATIONS,
    AlarmRetryInfo,
    AttemptPolicy,
    DurabilityScheduler,
    DurableHelper,
    ExecutionSpec,
    HandlerEntry,
    HostAlarmInfo,
    LifecycleHook,
    MethodOptions,
    RegisteredEvent,
    Release,
    RetryPolicy,
    TableSpec,
    check_handlers,
    given_options,
    read_stack,
    run_execution,
)
from ._errors import (
    DuplicateDurableCallError,
    DurableAttemptTimeoutError,
    DurableResultSerializationError,
    SerializedError,
)
from ._serialization import deserialize, serialize
from ._signal import AbortSignal
from ._types import JsonValue
from ._uuid import random_uuid
from ._validate import check_non_negative_int

CALLS = TableSpec("durability_calls", "id")
NULL_TEXT = serialize(None)
"""The stored envelope of `None`, the most common payload and result."""
CAPABILITY = "operations"
DEFAULT_RETRIES = RetryPolicy()
IDEMPOTENCY_PREFIX = "durability-call:v1:"

P = TypeVar("P")
"""The payload type a handler declares (`DurableCall[Order]`); unchecked at run time."""

Status = Literal["not_found", "pending", "completed", "failed"]


@dataclass(frozen=True, kw_only=True)
class DurableCall(Generic[P]):
    """What an operation handler receives: the call's id, payload and attempt (1-based).

    `signal` is aborted when the attempt times out or the record is purged.
    `idempotency_key` is the same for every attempt of this call and differs between
    objects: it holds the object's id, the operation and the call's id, so an external
    service given it applies the call's effect once. (Not slotted: `DurableCall[Order](...)`
    must be able to record its type argument.)
    """

    id: str
    operation: str
    payload: P
    attempt: int
    signal: AbortSignal
    idempotency_key: str


@dataclass(frozen=True, kw_only=True, slots=True)
class OperationResult:
    """The stored state of one call.

    ``pending`` has `attempt`, `next_attempt_at` and `last_error` (the last failure's
    message, `None` before any); ``completed`` has `result` and `attempt`; ``failed``
    has `attempt` and `error`; ``not_found`` has nothing else.
    """

    status: Status
    result: JsonValue = None
    attempt: int | None = None
    next_attempt_at: int | None = None
    last_error: str | None = None
    error: SerializedError | None = None


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
    _due_columns = "id, generation_id, operation, payload, created_at, attempt"
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
        include_result_in_events: bool = False,
        alarm_concurrency: int | None = None,
        alarm_min_delay_ms: int | None = None,
        alarm_handoff_ms: int | None = None,
        live_timers: bool | None = None,
        on_alarm_retry: Callable[[AlarmRetryInfo], Any] | None = None,
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
            include_result_in_events=include_result_in_events,
            options=given_options(locals()),
        )

    def operation(self, name: str) -> DurableOperation:
        """The operation object of handler `name` (the one attribute access returns)."""
        return self._entry(name)

    def _new_entry(self, name: str) -> DurableOperation:
        return DurableOperation(self, name)

    # -- internals used by DurableOperation ---------------------------------------------

    async def _register(self, operation: str, id: object, payload: object) -> None:
        key = _check_id(id)
        text = NULL_TEXT if payload is None else serialize(payload, "payload")
        now = now_ms()
        generation = random_uuid()

        def write(sql: SqlStorage) -> bool:
            inserted = sql.exec(
                "INSERT INTO durability_calls (id, operation, payload, status, result, attempt, "
                "next_attempt_at, last_error, last_error_name, completed_at, generation_id, "
                "created_at) VALUES (?, ?, ?, 'pending', NULL, 0, ?, NULL, NULL, NULL, ?, ?) "
                "ON CONFLICT(id) DO NOTHING",
                key,
                operation,
                text,
                now,
                generation,
                now,
            ).rows_written
            if inserted:
                return True
            stored = sql.exec("SELECT operation FROM durability_calls WHERE id = ?", key).to_list()
            if not stored:
                raise RuntimeError(f'Durable call "{key}" was not persisted')
            if stored[0]["operation"] != operation:
                raise DuplicateDurableCallError(key, str(stored[0]["operation"]), operation)
            return False

        if not await self._engine.transaction(write, due_at=lambda added: now if added else None):
            return
        if self._events:
            self._emit(
                RegisteredEvent(operation=operation, id=key, generation=generation, timestamp=now)
            )
        permit = self._engine.permits.try_acquire()
        if permit is None:
            return  # the reconciled alarm or the early timer picks the row up
        # The row was just inserted by this registration: nothing can be running it yet.
        spec = self._call_spec(key, operation, text, generation, now, 0)
        self._engine.tasks.run_in_background(
            self._run_eagerly(spec, permit),
            "durability.background_execution.failed",
            {"operation": operation, "id": key},
        )

    async def _run_eagerly(self, spec: ExecutionSpec, permit: Release) -> None:
        await run_execution(self._engine, spec, permit)
        await self._engine.schedule_next_alarm()

    def _read(self, operation: str, id: object) -> Row | None:
        key = _check_id(id)
        rows = self._engine.sql.exec(
            "SELECT operation, status, result, attempt, next_attempt_at, last_error, "
            "last_error_name, generation_id FROM durability_calls WHERE id = ?",
            key,
        ).to_list()
        if not rows:
            return None
        row = rows[0]
        if row["operation"] != operation:
            raise DuplicateDurableCallError(key, str(row["operation"]), operation)
        return row

    def _result(self, operation: str, id: object) -> tuple[OperationResult, Row | None]:
        row = self._read(operation, id)
        if row is None:
            return OperationResult(status="not_found"), None
        status = row["status"]
        if status == "pending":
            result = OperationResult(
                status="pending",
                attempt=row["attempt"],
                next_attempt_at=row["next_attempt_at"],
                last_error=row["last_error"],
            )
        elif status == "failed":
            error = SerializedError(
                row["last_error_name"] or "Error",
                row["last_error"] or "Durable operation failed",
                read_stack(self._engine.sql, CALLS, str(id), str(row["generation_id"])),
            )
            result = OperationResult(status="failed", attempt=row["attempt"], error=error)
        else:
            if row["result"] is None:
                raise RuntimeError(f'Completed durable call "{id}" has no result')
            result = OperationResult(
                status="completed", result=deserialize(row["result"]), attempt=row["attempt"]
            )
        return result, row

    async def _wait(self, operation: str, id: object, timeout_ms: object) -> OperationResult:
        timeout = check_non_negative_int("timeout_ms", timeout_ms)
        current, row = self._result(operation, id)
        if row is None or current.status != "pending" or timeout == 0:
            return current
        woken = asyncio.Event()
        unsubscribe = self._engine.watchers.watch(CALLS.name, str(id), lambda _row: woken.set())
        try:
            # The watcher is registered before this await, so no settlement can slip by.
            try:
                async with asyncio.timeout(timeout / 1000):
                    await woken.wait()
            except TimeoutError:
                pass
        finally:
            unsubscribe()
        return self._result(operation, id)[0]

    # -- execution ----------------------------------------------------------------------

    def _due_spec(self, row: tuple[Any, ...], info: HostAlarmInfo | None) -> ExecutionSpec:
        key, generation, operation, payload, created_at, attempt = row
        return self._call_spec(key, operation, payload, generation, created_at, attempt)

    def _call_spec(
        self,
        key: str,
        operation: str,
        payload_text: str,
        generation: str,
        created_at: int,
        attempt: int,
    ) -> ExecutionSpec:
        idempotency_key = call_idempotency_key(self._engine.object_id(), operation, key)

        def argument(attempt: int, signal: AbortSignal) -> DurableCall[JsonValue]:
            return DurableCall(
                id=key,
                operation=operation,
                payload=None if payload_text == NULL_TEXT else deserialize(payload_text),
                attempt=attempt,
                signal=signal,
                idempotency_key=idempotency_key,
            )

        def complete(sql: SqlStorage, result: Any, attempt: int) -> int | None:
            try:
                text = NULL_TEXT if result is None else serialize(result, "result")
            except (TypeError, ValueError) as error:
                raise DurableResultSerializationError(operation) from error
            completed_at = now_ms()
            won = sql.exec(
                "UPDATE durability_calls SET status = 'completed', result = ?, completed_at = ? "
                "WHERE id = ? AND generation_id = ? AND status = 'pending' AND attempt = ?",
                text,
                completed_at,
                key,
                generation,
                attempt,
            ).rows_written
            return completed_at if won else None

        return self._spec(
            key=key,
            name=operation,
            generation=generation,
            created_at=created_at,
            attempt=attempt,
            argument=argument,
            complete=complete,
        )

    def _is_terminal(self, error: BaseException, policy: AttemptPolicy) -> bool:
        """A result that cannot be stored fails the call: running it again would not help."""
        return isinstance(error, DurableResultSerializationError)


def call_idempotency_key(object_id: str | None, operation: str, id: str) -> str:
    """`durability-call:v1:<object id>:<operation>:<id>`, the operation name escaped so
    no two (operation, id) pairs give one key (the id, last, is kept as it is)."""
    return f"{IDEMPOTENCY_PREFIX}{object_id or ''}:{quote(operation, safe='')}:{id}"


def _check_id(id: object) -> str:
    if not isinstance(id, str):
        raise TypeError(f"id must be a string, got {type(id).__name__}")
    if not id:
        raise ValueError("id must be a non-empty string")
    return id


class DurableOperation(HandlerEntry[Durability]):
    """One operation of a `Durability`: call it to register, or read and wait on ids."""

    __slots__ = ()

    async def __call__(self, id: str, payload: JsonValue = None) -> None:
        """Register call `id` with `payload`; returns once it is durable, never waits for it."""
        await self._owner._register(self.name, id, payload)

    async def get_result(self, id: str) -> OperationResult:
        """The stored state of call `id` (`DuplicateDurableCallError` if it is another's)."""
        return self._owner._result(self.name, id)[0]

    def job(self, id: str) -> DurableJob:
        """A handle on call `id` to read or wait for its outcome."""
        return DurableJob(self._owner, self.name, _check_id(id))


class DurableJob:
    """A handle on one call: `get_result()` now, or `wait(timeout_ms=...)` for settlement."""

    __slots__ = ("_owner", "id", "operation")

    def __init__(self, owner: Durability, operation: str, id: str) -> None:
        self._owner = owner
        self.operation = operation
        self.id = id

    async def get_result(self) -> OperationResult:
        """The stored state of this call."""
        return self._owner._result(self.operation, self.id)[0]

    async def wait(self, *, timeout_ms: int = 30_000) -> OperationResult:
        """Wait until the call completes, fails or is purged, or `timeout_ms` elapses.

        Woken by settlement, not polling; returns the latest state, which is still
        ``pending`` on timeout. In memory only: a wait does not survive eviction.
        """
        return await self._owner._wait(self.operation, self.id, timeout_ms)

    def __repr__(self) -> str:
        return f"DurableJob({self.operation!r}, {self.id!r})"
