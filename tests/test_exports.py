"""The public surface is a decision: names, signatures, defaults, value types, errors."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import typing
from collections.abc import Callable
from typing import Any

import pytest

import durability
from conftest import MakeRuntime
from durability import (
    LATEST,
    AbortSignal,
    AlarmMethodOptions,
    AlarmRetryInfo,
    AttemptSettledEvent,
    AttemptStartedEvent,
    CancelledEvent,
    DuplicateDurableCallError,
    Durability,
    DurabilityAlarms,
    DurabilityError,
    DurabilityFanout,
    DurabilityLog,
    DurabilityScheduler,
    DurableAlarmInfo,
    DurableAlarmTimeoutError,
    DurableAttemptsExhaustedError,
    DurableAttemptTimeoutError,
    DurableCall,
    DurableCancelledError,
    DurableResultSerializationError,
    DurableRetryPolicyError,
    EnqueueResult,
    FanoutEnqueueError,
    FanoutInput,
    FanoutMessage,
    FanoutSettlementError,
    FanoutTarget,
    FanoutTimeoutError,
    LoadSnapshot,
    LogAppendError,
    LogAppendInput,
    LogBounds,
    LogLease,
    LogLeaseError,
    LogLeaseOptions,
    LogPage,
    LogRecord,
    LogRetention,
    LogSegment,
    LogTruncatedError,
    MethodOptions,
    NonRetryableError,
    OperationResult,
    PurgedEvent,
    RegisteredEvent,
    RetriedEvent,
    RetryAfter,
    RetryPolicy,
    RoutingError,
    ScheduledEvent,
    SerializedError,
    StoredFailure,
    StoredMessage,
    TerminalEvent,
    exponential,
)
from durability.routing import (
    DurabilityRouting,
    InboundLoad,
    OutboundLoad,
    RoutingAddress,
    RoutingClient,
)
from durability.runtime import AlarmInvocationInfo, DurableObject, Response, Runtime
from durability.testing import VirtualClock

EXPECTED = [
    "AbortSignal",
    "AlarmMethodOptions",
    "AlarmRetryInfo",
    "AttemptSettledEvent",
    "AttemptStartedEvent",
    "CancelledEvent",
    "Context",
    "DuplicateDurableCallError",
    "Durability",
    "DurabilityAlarms",
    "DurabilityError",
    "DurabilityFanout",
    "DurabilityLog",
    "DurabilityScheduler",
    "DurabilityWorkflows",
    "Durable",
    "DurableAlarmInfo",
    "DurableAlarmTimeoutError",
    "DurableAttemptTimeoutError",
    "DurableAttemptsExhaustedError",
    "DurableCall",
    "DurableCancelledError",
    "DurableJob",
    "DurableOperation",
    "DurableResultSerializationError",
    "DurableRetryPolicyError",
    "EnqueueResult",
    "FanoutEnqueueError",
    "FanoutInput",
    "FanoutMessage",
    "FanoutSettlementError",
    "FanoutTarget",
    "FanoutTimeoutError",
    "JsonValue",
    "LATEST",
    "LeaseRow",
    "LifecycleEvent",
    "LifecycleEventType",
    "LifecycleHook",
    "LoadSnapshot",
    "LogAppendError",
    "LogAppendInput",
    "LogBounds",
    "LogColdStorage",
    "LogLease",
    "LogLeaseError",
    "LogLeaseOptions",
    "LogPage",
    "LogRecord",
    "LogRetention",
    "LogSegment",
    "LogTruncatedError",
    "MAX_LOG_BYTES",
    "MessageWrite",
    "MethodOptions",
    "MigrationResult",
    "NamedAlarm",
    "NamedAlarmState",
    "NonRetryableError",
    "OperationResult",
    "PurgedEvent",
    "Recurrence",
    "RegisteredEvent",
    "RetriedEvent",
    "RetryAfter",
    "RetryPolicy",
    "RoutingError",
    "RoutingLoad",
    "ScheduledEvent",
    "SerializedError",
    "SqlCursor",
    "StoredFailure",
    "StoredMessage",
    "TerminalEvent",
    "Workflow",
    "WorkflowDeterminismError",
    "WorkflowEntrypoint",
    "WorkflowError",
    "WorkflowEvent",
    "WorkflowInstance",
    "WorkflowStep",
    "WorkflowStepError",
    "WorkflowTimeoutError",
    "exponential",
    "jitter",
    "named_alarm",
    "now_ms",
    "operation",
    "workflow",
]


def test_all_is_exactly_the_expected_list() -> None:
    """`__all__` is exactly the pinned list, in the same order."""
    assert durability.__all__ == EXPECTED


def test_expected_list_is_sorted_and_unique() -> None:
    """The pinned list is in plain `sorted()` order with no duplicates."""
    assert sorted(set(EXPECTED)) == EXPECTED


@pytest.mark.parametrize("name", EXPECTED)
def test_exported_name_resolves(name: str) -> None:
    """Every exported name exists on the package and is not private."""
    assert not name.startswith("_")
    assert hasattr(durability, name)


def test_no_public_name_is_left_out_of_all() -> None:
    """Every public, non-module attribute of the package is listed in `__all__`."""
    public = {
        name
        for name, value in vars(durability).items()
        if not name.startswith("_") and not inspect.ismodule(value) and name != "annotations"
    }
    assert public == set(EXPECTED)


def test_errors_exported_are_all_durability_errors() -> None:
    """Every exported exception class subclasses `DurabilityError`."""
    errors = [
        value
        for value in (getattr(durability, name) for name in EXPECTED)
        if isinstance(value, type) and issubclass(value, BaseException)
    ]
    assert len(errors) == 21
    assert all(issubclass(error, durability.DurabilityError) for error in errors)


def test_exported_classes_and_functions_name_durability_as_their_module() -> None:
    """Reprs and tracebacks show `durability.X`, the import path, not a private module."""
    defined = [
        value
        for value in (getattr(durability, name) for name in EXPECTED)
        if isinstance(value, type) or inspect.isfunction(value)
    ]
    assert len(defined) > 40
    assert all(value.__module__ == "durability" for value in defined)
    assert repr(durability.DurableJob) == "<class 'durability.DurableJob'>"


@pytest.mark.parametrize("name", EXPECTED)
def test_type_hints_of_exported_names_resolve(name: str) -> None:
    """`typing.get_type_hints` works on every exported class and function (tools rely on it)."""
    value = getattr(durability, name)
    if isinstance(value, type) or inspect.isfunction(value):
        typing.get_type_hints(value)


# -- names outside the package root ------------------------------------------------------

MODULE_NAMES = [
    ("durability.runtime", "Runtime"),
    ("durability.runtime", "DurableObject"),
    ("durability.runtime", "AlarmInvocationInfo"),
    ("durability.runtime", "Request"),
    ("durability.runtime", "Response"),
    ("durability.runtime", "ObjectNamespace"),
    ("durability.runtime", "ObjectStub"),
    ("durability.runtime", "ObjectId"),
    ("durability.runtime", "WebSocket"),
    ("durability.runtime", "WebSocketPair"),
    ("durability.runtime", "WebSocketRequestResponsePair"),
    ("durability.testing", "VirtualClock"),
    ("durability.testing", "crash_point"),
    ("durability.testing", "CommitFault"),
    ("durability.testing", "Effect"),
    ("durability.testing", "FaultRates"),
    ("durability.testing", "Faults"),
    ("durability.testing", "Invariant"),
    ("durability.testing", "Ledger"),
    ("durability.testing", "Reply"),
    ("durability.testing", "Scenario"),
    ("durability.testing", "Simulation"),
    ("durability.testing", "SimulationFailure"),
    ("durability.testing", "SimulationReport"),
    ("durability.testing", "SimulationRun"),
    ("durability.testing", "StoredObject"),
    ("durability.testing", "appends_kept"),
    ("durability.testing", "charged_once"),
    ("durability.testing", "effects_at_least_once"),
    ("durability.testing", "log_offsets_contiguous"),
    ("durability.testing", "nothing_stranded"),
    ("durability.cold", "FileColdStorage"),
    ("durability.routing", "EnqueueResult"),
    ("durability.routing", "RoutingLoad"),
    ("durability.routing", "LoadSnapshot"),
    ("durability.routing", "DurabilityRouting"),
    ("durability.routing", "RoutingClient"),
    ("durability.routing", "RoutingAddress"),
    ("durability.transforms", "timeout"),
    ("durability.transforms", "retry"),
    ("durability.transforms", "error_boundary"),
    ("durability.transforms", "define_transform"),
    ("durability.transforms", "create_transform_stub"),
    ("durability.transforms", "apply_transforms"),
    ("durability.cloudflare", "adapt"),
]


@pytest.mark.parametrize(("module", "name"), MODULE_NAMES)
def test_documented_name_imports_from_its_module(module: str, name: str) -> None:
    """Every documented name of a submodule is importable from the module it names."""
    assert hasattr(importlib.import_module(module), name)


@pytest.mark.parametrize("name", ["EnqueueResult", "RoutingLoad", "LoadSnapshot"])
def test_routing_names_are_the_same_objects_in_both_modules(name: str) -> None:
    """`durability.X` and `durability.routing.X` are one class, not two copies."""
    routing = importlib.import_module("durability.routing")
    assert getattr(durability, name) is getattr(routing, name)


# -- signatures and defaults ------------------------------------------------------------

KEYWORD_ONLY = [
    DurabilityScheduler,
    Durability,
    DurabilityAlarms,
    DurabilityLog,
    DurabilityFanout,
    RetryPolicy,
    MethodOptions,
    AlarmMethodOptions,
    FanoutTarget,
    Runtime,
    durability.DurableJob.wait,
    RoutingClient,
    DurabilityRouting.client,
]


@pytest.mark.parametrize("target", KEYWORD_ONLY, ids=lambda t: t.__qualname__)
def test_options_are_keyword_only(target: Callable[..., Any]) -> None:
    """Every option of these constructors and methods is keyword-only (the scheduler
    options a helper takes with `context=` are typed keywords too)."""
    parameters = [p for p in inspect.signature(target).parameters.values() if p.name != "self"]
    assert parameters
    kinds = {p.kind for p in parameters}
    assert inspect.Parameter.KEYWORD_ONLY in kinds
    assert kinds <= {inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_KEYWORD}


async def test_a_runtime_ctx_and_its_cursor_pass_isinstance_of_the_protocols(
    make_runtime: MakeRuntime,
) -> None:
    """`Context` and `SqlCursor` are runtime-checkable: a host's ctx and cursor pass."""
    seen: list[bool] = []

    class Checked(DurableObject):
        async def check(self) -> None:
            cursor = self.ctx.storage.sql.exec("SELECT 1 AS one")
            seen.append(isinstance(self.ctx, durability.Context))
            seen.append(isinstance(cursor, durability.SqlCursor))
            seen.append(isinstance(object(), durability.Context))

    async with make_runtime(bindings={"P": Checked}) as rt:
        await rt.env.P.get_by_name("p").check()
    assert seen == [True, True, False]


SIGNATURE_DEFAULTS: list[tuple[Any, str, object]] = [
    (DurabilityScheduler, "alarm_concurrency", 10),
    (DurabilityScheduler, "alarm_min_delay_ms", 15_000),
    (DurabilityScheduler, "alarm_handoff_ms", 840_000),
    (DurabilityScheduler, "live_timers", False),
    (DurabilityScheduler, "on_alarm_retry", None),
    (Durability, "scheduler", None),
    (Durability, "context", None),
    (Durability, "attempt_timeout_ms", 300_000),
    (Durability, "retries", RetryPolicy()),
    (Durability, "methods", None),
    (Durability, "on_lifecycle_event", None),
    (Durability, "lifecycle_events", None),
    (Durability, "include_result_in_events", False),
    (DurabilityAlarms, "scheduler", None),
    (DurabilityAlarms, "context", None),
    (DurabilityAlarms, "attempt_timeout_ms", 300_000),
    (DurabilityAlarms, "retries", RetryPolicy()),
    (DurabilityAlarms, "methods", None),
    (DurabilityAlarms, "lifecycle_events", None),
    (DurabilityAlarms, "on_lifecycle_event", None),
    (DurabilityLog, "scheduler", None),
    (DurabilityLog, "context", None),
    (DurabilityLog, "max_batch_size", 100),
    (DurabilityLog, "retention", None),
    (DurabilityLog, "cold", None),
    (DurabilityLog, "leases", None),
    (DurabilityLog, "routing", None),
    (DurabilityFanout, "scheduler", None),
    (DurabilityFanout, "context", None),
    (DurabilityFanout, "attempt_timeout_ms", 300_000),
    (DurabilityFanout, "retries", RetryPolicy()),
    (DurabilityFanout, "max_batch_size", 10),
    (DurabilityFanout, "batch_delay_ms", 0),
    (DurabilityFanout, "dlq", None),
    (DurabilityFanout, "routing", None),
    (DurabilityFanout, "on_lifecycle_event", None),
    (DurabilityFanout.enqueue, "targets", None),
    (DurabilityFanout.alarm, "info", None),
    (DurabilityFanout.migrate, "target", LATEST),
    (FanoutMessage.retry, "delay_ms", None),
    (DurabilityLog.read, "limit", None),
    (DurabilityLog.lease, "limit", None),
    (DurabilityScheduler.alarm, "info", None),
    (Durability.alarm, "info", None),
    (DurabilityAlarms.alarm, "info", None),
    (Durability.migrate, "target", LATEST),
    (DurabilityAlarms.migrate, "target", LATEST),
    (durability.NamedAlarm.__call__, "payload", None),
    (durability.NamedAlarm.every, "start_at", None),
    (durability.NamedAlarm.every, "catch_up", "latest"),
    (durability.NamedAlarm.every, "payload", None),
    (durability.NamedAlarm.cron, "tz", "UTC"),
    (durability.NamedAlarm.cron, "catch_up", "latest"),
    (durability.NamedAlarm.cron, "payload", None),
    (DurabilityLog.migrate, "target", LATEST),
    (Runtime, "path", None),
    (Runtime, "bindings", {}),
    (Runtime, "clock", None),
    (VirtualClock, "start_ms", 1_700_000_000_000),
    (exponential, "initial_delay_ms", 1000),
    (exponential, "max_delay_ms", 300_000),
    (Response, "status", 200),
    (Response, "headers", None),
    (Response.json, "status", 200),
    (RoutingClient, "sharding", None),
    (RoutingClient, "soft_backlog_limit", 1000),
    (DurabilityRouting.client, "sharding", None),
    (DurabilityRouting.client, "soft_backlog_limit", 1000),
    (durability.operation, "attempt_timeout_ms", None),
    (durability.operation, "retries", None),
    (durability.named_alarm, "attempt_timeout_ms", None),
    (durability.named_alarm, "retries", None),
    (durability.named_alarm, "retry_timeouts", False),
]


@pytest.mark.parametrize(
    ("target", "name", "default"),
    SIGNATURE_DEFAULTS,
    ids=[f"{t.__qualname__}.{n}" for t, n, _ in SIGNATURE_DEFAULTS],
)
def test_signature_default(target: Callable[..., Any], name: str, default: object) -> None:
    """Each documented option has the documented default."""
    assert inspect.signature(target).parameters[name].default == default


def _values(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (RetryPolicy(), {"max_attempts": 5, "delay": None, "non_retryable": ()}),
        (MethodOptions(), {"attempt_timeout_ms": None, "retries": None}),
        (
            AlarmMethodOptions(),
            {"attempt_timeout_ms": None, "retries": None, "retry_timeouts": False},
        ),
        (LogRetention(), {"max_age_ms": None, "max_records": None, "max_bytes": None}),
        (
            LogLeaseOptions(),
            {"max_parallelism": 1, "lease_ms": 30_000, "max_attempts": None, "on_poison": None},
        ),
        (LogAppendInput("x"), {"body": "x", "deduplication_key": None}),
        (FanoutInput("x"), {"body": "x", "id": None, "deduplication_key": None}),
        (
            FanoutTarget(),
            {
                "deliver": None,
                "storage": None,
                "ack_on_return": False,
                "attempt_timeout_ms": None,
                "retries": None,
            },
        ),
    ],
    ids=lambda v: type(v).__name__ if dataclasses.is_dataclass(v) else "",
)
def test_option_object_defaults(obj: Any, expected: dict[str, Any]) -> None:
    """Option objects built without arguments carry the documented defaults."""
    assert _values(obj) == expected


FIELDS = [
    (DurableCall, "id operation payload attempt signal idempotency_key"),
    (OperationResult, "status result attempt next_attempt_at last_error error id operation"),
    (
        DurableAlarmInfo,
        "name scheduled_time attempt is_retry retry_count idempotency_key signal platform "
        "payload occurrence",
    ),
    (AlarmRetryInfo, "error retry_in_ms retry_count is_retry object_id"),
    (SerializedError, "name message"),
    (LogAppendInput, "body deduplication_key"),
    (LogRecord, "offset deduplication_key body appended_at"),
    (LogPage, "records next_offset lag"),
    (LogBounds, "oldest_offset hot_offset next_offset"),
    (LogSegment, "first_offset last_offset records"),
    (LogRetention, "max_age_ms max_records max_bytes"),
    (LogLeaseOptions, "max_parallelism lease_ms max_attempts on_poison"),
    (LogLease, "batch_id consumer records first_offset last_offset attempt expires_at"),
    (EnqueueResult, "success value error load"),
    (LoadSnapshot, "observed_at window_ms inbound outbound"),
    (RetryPolicy, "max_attempts delay non_retryable"),
    (MethodOptions, "attempt_timeout_ms retries"),
    (AlarmMethodOptions, "attempt_timeout_ms retries retry_timeouts"),
    (RegisteredEvent, "type entity_kind operation id generation timestamp attempt"),
    (
        ScheduledEvent,
        "type entity_kind alarm id generation timestamp scheduled_time attempt occurrence",
    ),
    (
        durability.NamedAlarmState,
        "name scheduled_time next_attempt_at attempt status last_error recurrence",
    ),
    (durability.Recurrence, "kind interval_ms expression tz catch_up"),
    (AttemptStartedEvent, "type entity_kind operation alarm id generation timestamp attempt"),
    (
        AttemptSettledEvent,
        "type entity_kind operation alarm id generation timestamp attempt outcome duration_ms "
        "error next_attempt_at result",
    ),
    (
        TerminalEvent,
        "type entity_kind operation alarm id generation timestamp attempt reason error",
    ),
    (PurgedEvent, "type entity_kind timestamp before count"),
    (FanoutInput, "body id deduplication_key"),
    (FanoutTarget, "deliver storage ack_on_return attempt_timeout_ms retries"),
    (
        StoredMessage,
        "id message_id target body enqueued_at stored_at attempts failure",
    ),
    (StoredFailure, "reason error"),
    (
        CancelledEvent,
        "type entity_kind operation alarm id generation timestamp attempt running",
    ),
    (RetriedEvent, "type entity_kind operation id generation timestamp attempt"),
    (RoutingAddress, "shard location_hint"),
    (InboundLoad, "in_flight completed average_processing_ms"),
    (OutboundLoad, "in_flight completed average_processing_ms pending_deliveries"),
    (AlarmInvocationInfo, "retry_count is_retry"),
]


@pytest.mark.parametrize(("cls", "names"), FIELDS, ids=[c.__name__ for c, _ in FIELDS])
def test_value_types_are_frozen_dataclasses_with_documented_fields(cls: type, names: str) -> None:
    """Value types are frozen dataclasses whose fields are the documented ones, in order."""
    assert dataclasses.is_dataclass(cls)
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert [f.name for f in dataclasses.fields(cls)] == names.split()


# -- errors -----------------------------------------------------------------------------

ERRORS: list[tuple[DurabilityError, str, dict[str, Any]]] = [
    (NonRetryableError("stop now"), "stop now", {}),
    (
        DurableCancelledError(alarm="renew"),
        'Durable named alarm "renew" was cancelled',
        {"alarm": "renew", "operation": None, "id": None},
    ),
    (
        DurableAttemptTimeoutError("charge", 1000),
        'Durable operation "charge" timed out after 1000ms',
        {"operation": "charge", "timeout_ms": 1000},
    ),
    (
        DurableAlarmTimeoutError("renew", 50),
        'Durable alarm "renew" timed out after 50ms',
        {"timeout_ms": 50},
    ),
    (
        DurableRetryPolicyError("fanout"),
        "Retry policy for fanout must produce a non-negative safe-integer timestamp",
        {},
    ),
    (
        DurableResultSerializationError("charge"),
        'Result for durable operation "charge" is not JSON-serializable',
        {"operation": "charge"},
    ),
    (
        DurableAttemptsExhaustedError("named alarm", "renew", 5),
        'Durable named alarm "renew" exhausted its 5 attempts',
        {"max_attempts": 5},
    ),
    (
        DuplicateDurableCallError("inv-1", "charge", "refund"),
        'Durable call "inv-1" already belongs to operation "charge", not "refund"',
        {"id": "inv-1", "existing_operation": "charge", "requested_operation": "refund"},
    ),
    (LogAppendError("bad batch"), "bad batch", {}),
    (
        LogTruncatedError(3, 7),
        "Log offset 3 was trimmed; the oldest retained offset is 7",
        {"requested_offset": 3, "oldest_offset": 7},
    ),
    (LogLeaseError("b-1"), 'Log lease "b-1" is not held', {"batch_id": "b-1"}),
    (FanoutEnqueueError("no targets"), "no targets", {}),
    (FanoutSettlementError("d-1"), 'Fanout delivery "d-1" is stale', {"id": "d-1"}),
    (
        FanoutSettlementError("d-1", "acked"),
        'Fanout delivery "d-1" was already settled as "acked"',
        {"outcome": "acked"},
    ),
    (
        FanoutTimeoutError(250),
        "Fanout delivery timed out after 250ms",
        {"timeout_ms": 250},
    ),
    (RoutingError("empty shard"), "empty shard", {}),
    (
        DurableCancelledError("charge", "inv-1"),
        'Durable operation "charge" call "inv-1" was cancelled',
        {"operation": "charge", "id": "inv-1"},
    ),
    (RetryAfter(5000), "Retry requested after 5000ms", {"delay_ms": 5000}),
]


@pytest.mark.parametrize(
    ("error", "message", "attributes"), ERRORS, ids=[type(e[0]).__name__ for e in ERRORS]
)
def test_error_class_message_and_attributes(
    error: DurabilityError, message: str, attributes: dict[str, Any]
) -> None:
    """Each error subclasses `DurabilityError`, has its documented text and its attributes."""
    assert isinstance(error, DurabilityError)
    assert isinstance(error, Exception)
    assert str(error) == message
    assert {name: getattr(error, name) for name in attributes} == attributes


def test_durable_call_is_generic_in_its_payload() -> None:
    """DurableCall[Order] is a valid annotation and builds a plain DurableCall."""
    alias = DurableCall[dict[str, int]]
    call = alias(
        id="i",
        operation="op",
        payload={"n": 1},
        attempt=1,
        signal=AbortSignal(),
        idempotency_key="k",
    )
    assert type(call) is DurableCall
    assert call.payload == {"n": 1}
