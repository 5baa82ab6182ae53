"""The Python API contract (API.md): documented names, signatures, defaults, errors."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
import random
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import durability
from durability import (
    LATEST,
    MAX_LOG_BYTES,
    AbortSignal,
    AlarmMethodOptions,
    AlarmRetryInfo,
    AttemptSettledEvent,
    AttemptStartedEvent,
    DuplicateDurableCallError,
    Durability,
    DurabilityAlarms,
    DurabilityError,
    DurabilityLog,
    DurabilityScheduler,
    DurableAlarmInfo,
    DurableAlarmTimeoutError,
    DurableAttemptsExhaustedError,
    DurableAttemptTimeoutError,
    DurableCall,
    DurableResultSerializationError,
    DurableRetryPolicyError,
    EnqueueResult,
    FanoutEnqueueError,
    FanoutSettlementError,
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
    RetryPolicy,
    RoutingError,
    RoutingLoad,
    ScheduledEvent,
    SerializedError,
    TerminalEvent,
    exponential,
    jitter,
)
from durability._operations import DurableJob
from durability.cold import FileColdStorage
from durability.runtime import (
    AlarmInvocationInfo,
    DurableObject,
    ObjectStub,
    Request,
    Response,
    Runtime,
)
from durability.testing import VirtualClock

T0 = 1_700_000_000_000
DURABILITY_TABLES = "SELECT name FROM sqlite_master WHERE name LIKE 'durability%' ORDER BY name"


class Holder(DurableObject):
    """An object that hands its `ctx` to the test, so helpers can be built on it directly."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.probe: SimpleNamespace = env["PROBE"]
        self.probe.ctx = ctx

    def now(self) -> int:
        """`durability.now_ms()` as seen inside the object."""
        return durability.now_ms()

    def echo(self, value: Any) -> Any:
        """The argument, copied both ways as JSON."""
        return value

    async def fail(self) -> None:
        """Raise an exception the caller must see with its class and message."""
        raise KeyError("missing")

    async def _hidden(self) -> None:
        """Private: stubs must refuse it."""

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        """Record the delivery; raise while the probe says so."""
        self.probe.alarms.append((durability.now_ms(), info))
        if self.probe.fail_alarms:
            raise RuntimeError("alarm failed")


@dataclass
class Host:
    """A running runtime, its clock, and one live `Holder` whose ctx the test uses."""

    runtime: Runtime
    clock: VirtualClock
    probe: SimpleNamespace
    stub: ObjectStub

    @property
    def ctx(self) -> Any:
        return self.probe.ctx

    def tables(self) -> list[str]:
        return [row["name"] for row in self.ctx.storage.sql.exec(DURABILITY_TABLES)]


@pytest.fixture
async def host() -> AsyncIterator[Host]:
    """An in-memory runtime on a virtual clock with one live object."""
    clock = VirtualClock()
    probe = SimpleNamespace(ctx=None, alarms=[], fail_alarms=False)
    async with Runtime(bindings={"OBJ": Holder, "PROBE": probe}, clock=clock) as runtime:
        stub = runtime.env.OBJ.get_by_name("contract")
        await stub.now()
        yield Host(runtime, clock, probe, stub)


def _noop(_: Any) -> None:
    """A handler that does nothing."""


# -- names and modules ------------------------------------------------------------------

API_NAMES = """
    AbortSignal AlarmMethodOptions AlarmRetryInfo DuplicateDurableCallError Durability
    DurabilityAlarms DurabilityError DurabilityLog DurabilityScheduler DurableAlarmInfo
    DurableAlarmTimeoutError DurableAttemptTimeoutError DurableAttemptsExhaustedError
    DurableCall DurableResultSerializationError DurableRetryPolicyError EnqueueResult
    FanoutEnqueueError FanoutSettlementError FanoutTimeoutError LATEST LeaseRow LoadSnapshot
    LogAppendError LogAppendInput LogBounds LogColdStorage LogLease LogLeaseError
    LogLeaseOptions LogPage LogRecord LogRetention LogSegment LogTruncatedError MAX_LOG_BYTES
    MethodOptions MigrationResult NonRetryableError OperationResult RetryPolicy RoutingError
    RoutingLoad SerializedError exponential jitter now_ms
""".split()  # noqa: SIM905 - a word list reads better than 47 lines
DOCUMENTED_NAMES = [("durability", name) for name in API_NAMES] + [
    ("durability.runtime", "Runtime"),
    ("durability.runtime", "DurableObject"),
    ("durability.runtime", "AlarmInvocationInfo"),
    ("durability.runtime", "Request"),
    ("durability.runtime", "Response"),
    ("durability.runtime", "ObjectNamespace"),
    ("durability.runtime", "ObjectStub"),
    ("durability.runtime", "ObjectId"),
    ("durability.testing", "VirtualClock"),
    ("durability.cold", "FileColdStorage"),
    ("durability.routing", "EnqueueResult"),
    ("durability.routing", "RoutingLoad"),
    ("durability.routing", "LoadSnapshot"),
]


@pytest.mark.parametrize(("module", "name"), DOCUMENTED_NAMES)
def test_documented_name_imports_from_its_module(module: str, name: str) -> None:
    """Every name API.md documents is importable from the module it names."""
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
    RetryPolicy,
    MethodOptions,
    AlarmMethodOptions,
    Runtime,
    DurableJob.wait,
]


@pytest.mark.parametrize("target", KEYWORD_ONLY, ids=lambda t: t.__qualname__)
def test_options_are_keyword_only(target: Callable[..., Any]) -> None:
    """Every option of these constructors and methods is keyword-only."""
    parameters = [p for p in inspect.signature(target).parameters.values() if p.name != "self"]
    assert parameters
    assert {p.kind for p in parameters} == {inspect.Parameter.KEYWORD_ONLY}


SIGNATURE_DEFAULTS = [
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
    (Durability, "include_result_in_events", False),
    (DurabilityAlarms, "scheduler", None),
    (DurabilityAlarms, "context", None),
    (DurabilityAlarms, "attempt_timeout_ms", 300_000),
    (DurabilityAlarms, "retries", RetryPolicy()),
    (DurabilityAlarms, "methods", None),
    (DurabilityAlarms, "on_lifecycle_event", None),
    (DurabilityLog, "scheduler", None),
    (DurabilityLog, "context", None),
    (DurabilityLog, "max_batch_size", 100),
    (DurabilityLog, "retention", None),
    (DurabilityLog, "cold", None),
    (DurabilityLog, "leases", None),
    (DurabilityLog, "routing", None),
    (DurabilityLog.read, "limit", None),
    (DurabilityLog.lease, "limit", None),
    (DurabilityScheduler.alarm, "info", None),
    (Durability.alarm, "info", None),
    (DurabilityAlarms.alarm, "info", None),
    (Durability.migrate, "target", LATEST),
    (DurabilityAlarms.migrate, "target", LATEST),
    (DurabilityLog.migrate, "target", LATEST),
    (Runtime, "path", None),
    (Runtime, "clock", None),
    (VirtualClock, "start_ms", 1_700_000_000_000),
    (exponential, "initial_delay_ms", 1000),
    (exponential, "max_delay_ms", 300_000),
    (Response, "status", 200),
    (Response, "headers", None),
    (Response.json, "status", 200),
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
        (RetryPolicy(), {"max_attempts": 5, "delay": None}),
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
    ],
    ids=lambda v: type(v).__name__ if dataclasses.is_dataclass(v) else "",
)
def test_option_object_defaults(obj: Any, expected: dict[str, Any]) -> None:
    """Option objects built without arguments carry the documented defaults."""
    assert _values(obj) == expected


FIELDS = [
    (DurableCall, "id operation payload attempt signal"),
    (OperationResult, "status result attempt next_attempt_at last_error error"),
    (
        DurableAlarmInfo,
        "name scheduled_time attempt is_retry retry_count idempotency_key signal platform",
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
    (RetryPolicy, "max_attempts delay"),
    (MethodOptions, "attempt_timeout_ms retries"),
    (AlarmMethodOptions, "attempt_timeout_ms retries retry_timeouts"),
    (RegisteredEvent, "type entity_kind operation id generation timestamp attempt"),
    (ScheduledEvent, "type entity_kind alarm id generation timestamp scheduled_time attempt"),
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
]


@pytest.mark.parametrize(("cls", "names"), FIELDS, ids=[c.__name__ for c, _ in FIELDS])
def test_value_types_are_frozen_dataclasses_with_documented_fields(cls: type, names: str) -> None:
    """Value types are frozen dataclasses whose fields are the documented ones, in order."""
    assert dataclasses.is_dataclass(cls)
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert [f.name for f in dataclasses.fields(cls)] == names.split()


def test_load_snapshot_directions_have_documented_fields() -> None:
    """`inbound` has in_flight/completed/average_processing_ms; `outbound` adds pending."""
    snapshot = RoutingLoad().snapshot(3)
    assert snapshot.window_ms == 60_000
    assert _values(snapshot.inbound) == {
        "in_flight": 0,
        "completed": 0,
        "average_processing_ms": None,
    }
    assert _values(snapshot.outbound) == {
        "in_flight": 0,
        "completed": 0,
        "average_processing_ms": None,
        "pending_deliveries": 3,
    }


# -- policy -----------------------------------------------------------------------------


def test_retry_policy_is_frozen() -> None:
    """A `RetryPolicy` cannot be changed after construction."""
    policy = RetryPolicy(max_attempts=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.max_attempts = 4  # type: ignore[misc]


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"max_attempts": 0}, ValueError, "max_attempts must be a positive integer"),
        ({"max_attempts": -1}, ValueError, "max_attempts must be a positive integer"),
        ({"max_attempts": 2.5}, TypeError, "max_attempts"),
        ({"max_attempts": True}, TypeError, "max_attempts"),
        ({"delay": 1000}, TypeError, "delay"),
    ],
)
def test_retry_policy_validates_at_construction(
    options: dict[str, Any], error: type[Exception], message: str
) -> None:
    """`RetryPolicy` rejects a bad `max_attempts` or `delay` when it is built."""
    with pytest.raises(error, match=re.escape(message)):
        RetryPolicy(**options)


@pytest.mark.parametrize(
    ("attempt", "options", "expected"),
    [
        (1, {}, 1000),
        (2, {}, 2000),
        (3, {}, 4000),
        (9, {}, 256_000),
        (10, {}, 300_000),
        (200, {}, 300_000),
        (3, {"initial_delay_ms": 100}, 400),
        (5, {"initial_delay_ms": 100, "max_delay_ms": 1000}, 1000),
    ],
)
def test_exponential(attempt: int, options: dict[str, int], expected: int) -> None:
    """`exponential` is `min(initial_delay_ms * 2 ** (attempt - 1), max_delay_ms)`."""
    assert exponential(attempt, **options) == expected


@pytest.mark.parametrize(("draw", "expected"), [(0.0, 500.0), (0.5, 750.0), (0.998, 999.0)])
def test_jitter_is_equal_jitter(
    monkeypatch: pytest.MonkeyPatch, draw: float, expected: float
) -> None:
    """`jitter(d)` is `d/2 + random() * d/2`: uniformly in `[d/2, d)`."""
    monkeypatch.setattr(random, "random", lambda: draw)
    assert jitter(1000) == pytest.approx(expected)


# -- option validation and attachment ---------------------------------------------------


def _build(kind: str, ctx: Any, options: dict[str, Any]) -> object:
    """Construct the helper `kind` on `ctx` (a private scheduler) with `options`."""
    if kind == "scheduler":
        return DurabilityScheduler(context=ctx, **options)
    if kind == "log":
        return DurabilityLog(context=ctx, **options)
    helper = Durability if kind == "operations" else DurabilityAlarms
    return helper(context=ctx, **{"handlers": {"run": _noop}, **options})


POSITIVE = "must be a positive integer"
BETWEEN = "alarm_min_delay_ms must be between 1000 and 15000"
INVALID_OPTIONS: list[tuple[str, dict[str, Any], type[Exception], str]] = [
    ("scheduler", {"alarm_concurrency": 0}, ValueError, f"alarm_concurrency {POSITIVE}"),
    ("scheduler", {"alarm_concurrency": 1.5}, TypeError, "alarm_concurrency"),
    ("scheduler", {"alarm_concurrency": True}, TypeError, "alarm_concurrency"),
    ("scheduler", {"alarm_min_delay_ms": 999}, ValueError, BETWEEN),
    ("scheduler", {"alarm_min_delay_ms": 15_001}, ValueError, BETWEEN),
    ("scheduler", {"alarm_handoff_ms": 0}, ValueError, f"alarm_handoff_ms {POSITIVE}"),
    ("scheduler", {"live_timers": 1}, TypeError, "live_timers"),
    ("scheduler", {"on_alarm_retry": 1, "alarm_concurrency": 0}, TypeError, "on_alarm_retry"),
    ("operations", {"alarm_concurrency": 0}, ValueError, f"alarm_concurrency {POSITIVE}"),
    ("operations", {"attempt_timeout_ms": 0}, ValueError, f"attempt_timeout_ms {POSITIVE}"),
    ("operations", {"attempt_timeout_ms": "5"}, TypeError, "attempt_timeout_ms"),
    ("operations", {"retries": 5}, TypeError, "retries"),
    (
        "operations",
        {"methods": {"run": MethodOptions(attempt_timeout_ms=0)}},
        ValueError,
        f"methods.run.attempt_timeout_ms {POSITIVE}",
    ),
    ("operations", {"methods": {"run": {}}}, TypeError, "methods.run"),
    ("operations", {"on_lifecycle_event": 1}, TypeError, "on_lifecycle_event must be callable"),
    ("operations", {"include_result_in_events": 1}, TypeError, "include_result_in_events"),
    ("operations", {"handlers": {"charge": 1}}, TypeError, "handlers.charge must be callable"),
    ("alarms", {"handlers": {"renew": 1}}, TypeError, "handlers.renew"),
    ("alarms", {"attempt_timeout_ms": -1}, ValueError, f"attempt_timeout_ms {POSITIVE}"),
    ("alarms", {"on_lifecycle_event": 1}, TypeError, "on_lifecycle_event must be callable"),
    (
        "alarms",
        {"methods": {"run": AlarmMethodOptions(retry_timeouts="yes")}},  # type: ignore[arg-type]
        TypeError,
        "methods.run.retry_timeouts",
    ),
    ("log", {"max_batch_size": 0}, ValueError, f"max_batch_size {POSITIVE}"),
    ("log", {"retention": {"max_records": 1}}, TypeError, "retention"),
    ("log", {"leases": {}}, TypeError, "leases"),
    ("log", {"cold": object()}, TypeError, "cold"),
    ("log", {"routing": object()}, TypeError, "routing"),
]


@pytest.mark.parametrize(
    ("kind", "options", "error", "message"),
    INVALID_OPTIONS,
    ids=[f"{kind}-{sorted(options)[-1]}" for kind, options, _, _ in INVALID_OPTIONS],
)
async def test_invalid_option_raises_and_writes_nothing(
    host: Host, kind: str, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    """A bad option raises at construction with a message naming it, and writes nothing."""
    with pytest.raises(error, match=re.escape(message)):
        _build(kind, host.ctx, options)
    assert host.tables() == []


INVALID_LOG_OPTIONS: list[tuple[Callable[[], object], str]] = [
    (lambda: LogRetention(max_bytes=MAX_LOG_BYTES + 1), "must not exceed 1073741824 bytes"),
    (lambda: LogRetention(max_age_ms=0), f"retention.max_age_ms {POSITIVE}"),
    (lambda: LogRetention(max_records=0), f"retention.max_records {POSITIVE}"),
    (lambda: LogLeaseOptions(max_parallelism=0), f"leases.max_parallelism {POSITIVE}"),
    (lambda: LogLeaseOptions(lease_ms=0), f"leases.lease_ms {POSITIVE}"),
    (lambda: LogLeaseOptions(max_attempts=0), f"leases.max_attempts {POSITIVE}"),
]


@pytest.mark.parametrize(
    ("build", "message"), INVALID_LOG_OPTIONS, ids=[m for _, m in INVALID_LOG_OPTIONS]
)
def test_invalid_log_option_objects_raise_at_construction(
    build: Callable[[], object], message: str
) -> None:
    """`LogRetention`/`LogLeaseOptions` validate when built, naming `retention.`/`leases.`."""
    with pytest.raises(ValueError, match=re.escape(message)):
        build()


async def test_scheduler_and_context_together_raise(host: Host) -> None:
    """A helper takes `scheduler=` or `context=`, not both, and not neither."""
    scheduler = DurabilityScheduler(context=host.ctx)
    with pytest.raises(ValueError, match="scheduler"):
        Durability(context=host.ctx, scheduler=scheduler, handlers={"charge": _noop})
    with pytest.raises(ValueError, match="alarm_concurrency"):
        Durability(scheduler=scheduler, handlers={"charge": _noop}, alarm_concurrency=2)
    with pytest.raises(TypeError):
        Durability(handlers={"charge": _noop})
    assert host.tables() == []


RESERVED = [(Durability, name) for name in ("alarm", "purge_before", "operation", "migrate")] + [
    (DurabilityAlarms, name) for name in ("alarm", "purge_before", "named", "migrate")
]


@pytest.mark.parametrize(("cls", "name"), RESERVED, ids=[f"{c.__name__}.{n}" for c, n in RESERVED])
async def test_reserved_handler_name_raises(host: Host, cls: type, name: str) -> None:
    """A handler named like a public attribute of its helper raises `ValueError`."""
    with pytest.raises(ValueError, match=re.escape(f'"{name}" is reserved by {cls.__name__}')):
        cls(context=host.ctx, handlers={name: _noop})
    assert host.tables() == []


HELPERS: list[tuple[str, Callable[[DurabilityScheduler], object]]] = [
    ("Durability", lambda s: Durability(scheduler=s, handlers={"charge": _noop})),
    ("DurabilityAlarms", lambda s: DurabilityAlarms(scheduler=s, handlers={"renew": _noop})),
    ("DurabilityLog", lambda s: DurabilityLog(scheduler=s)),
]


@pytest.mark.parametrize("build", [h[1] for h in HELPERS], ids=[h[0] for h in HELPERS])
async def test_second_helper_of_a_kind_raises(
    host: Host, build: Callable[[DurabilityScheduler], object]
) -> None:
    """A second helper of the same kind on one scheduler raises `ValueError`."""
    scheduler = DurabilityScheduler(context=host.ctx)
    build(scheduler)
    with pytest.raises(ValueError, match="already attached"):
        build(scheduler)


async def test_rejected_helper_leaves_the_scheduler_free(host: Host) -> None:
    """A helper rejected at construction does not claim its kind on the shared scheduler."""
    scheduler = DurabilityScheduler(context=host.ctx)
    with pytest.raises(TypeError):
        Durability(scheduler=scheduler, handlers={"charge": _noop}, on_lifecycle_event=1)
    with pytest.raises(ValueError):
        DurabilityAlarms(scheduler=scheduler, handlers={"renew": _noop}, attempt_timeout_ms=0)
    assert host.tables() == []
    Durability(scheduler=scheduler, handlers={"charge": _noop})
    DurabilityAlarms(scheduler=scheduler, handlers={"renew": _noop})


async def test_helpers_of_different_kinds_share_a_scheduler(host: Host) -> None:
    """One helper of each kind attaches to one shared scheduler."""
    scheduler = DurabilityScheduler(context=host.ctx)
    for _, build in HELPERS:
        build(scheduler)
    tables = set(host.tables())
    assert {"durability_alarms", "durability_calls", "durability_migrations"} <= tables
    assert any(name.startswith("durability_log") for name in tables)


# -- errors -----------------------------------------------------------------------------

ERRORS: list[tuple[DurabilityError, str, dict[str, Any]]] = [
    (NonRetryableError("stop now"), "stop now", {}),
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
]


@pytest.mark.parametrize(
    ("error", "message", "attributes"), ERRORS, ids=[type(e[0]).__name__ for e in ERRORS]
)
def test_error_class_message_and_attributes(
    error: DurabilityError, message: str, attributes: dict[str, Any]
) -> None:
    """Each error subclasses `DurabilityError`, has the spec's text and its attributes."""
    assert isinstance(error, DurabilityError)
    assert isinstance(error, Exception)
    assert str(error) == message
    assert {name: getattr(error, name) for name in attributes} == attributes


# -- JSON values and times --------------------------------------------------------------

NOT_JSON = [{1, 2}, b"bytes", float("nan"), float("inf"), {1: "int key"}, object()]


@pytest.mark.parametrize("value", NOT_JSON, ids=lambda v: type(v).__name__)
async def test_non_json_payload_raises_type_error_and_stores_nothing(
    host: Host, value: object
) -> None:
    """Operation payloads, log bodies and stub arguments that are not JSON raise TypeError."""
    operations = Durability(context=host.ctx, handlers={"charge": _noop})
    log = DurabilityLog(context=host.ctx)
    with pytest.raises(TypeError):
        await operations.charge(id="a", payload=value)
    assert (await operations.charge.get_result("a")).status == "not_found"
    with pytest.raises(TypeError):
        await log.append(LogAppendInput(value))
    assert (await log.bounds()).next_offset == 0
    with pytest.raises(TypeError):
        await host.stub.echo(value)


async def test_non_json_result_fails_the_call_terminally(host: Host) -> None:
    """A handler result that is not JSON fails the call with the serialization error."""
    calls: list[int] = []

    def handler(call: DurableCall) -> object:
        calls.append(call.attempt)
        return {1, 2}

    operations = Durability(context=host.ctx, handlers={"charge": handler})
    await operations.charge(id="a", payload=None)
    result = await operations.charge.job("a").wait(timeout_ms=1000)
    assert result.status == "failed"
    assert result.error == SerializedError(
        "DurableResultSerializationError",
        'Result for durable operation "charge" is not JSON-serializable',
    )
    assert calls == [1]


def _aware(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


async def test_aware_datetimes_are_accepted_where_times_are(host: Host) -> None:
    """Named-alarm times, purge cutoffs and `set_alarm` take aware datetimes as ms."""
    seen: list[DurableAlarmInfo] = []
    scheduler = DurabilityScheduler(context=host.ctx)
    alarms = DurabilityAlarms(scheduler=scheduler, handlers={"renew": seen.append})
    operations = Durability(scheduler=scheduler, handlers={"charge": _noop})
    await alarms.renew(_aware(T0 + 5_000))
    await host.clock.advance(5_000)
    assert [info.scheduled_time for info in seen] == [T0 + 5_000]
    await operations.charge(id="a", payload=1)
    assert await operations.purge_before(_aware(T0 + 5_001)) == 1
    assert await alarms.purge_before(_aware(T0)) == 0
    storage = host.ctx.storage
    await storage.set_alarm(_aware(T0 + 9_000))
    assert await storage.get_alarm() == T0 + 9_000


async def test_naive_datetimes_are_rejected(host: Host) -> None:
    """A naive datetime is ambiguous and raises `ValueError` naming the argument."""
    alarms = DurabilityAlarms(context=host.ctx, handlers={"renew": _noop})
    with pytest.raises(ValueError, match="scheduled_time"):
        await alarms.renew(datetime(2030, 1, 1))
    with pytest.raises(ValueError, match="before"):
        await alarms.purge_before(datetime(2030, 1, 1))


async def test_negative_scheduled_time_is_rejected(host: Host) -> None:
    """A named-alarm time must be a non-negative integer of ms."""
    alarms = DurabilityAlarms(context=host.ctx, handlers={"renew": _noop})
    with pytest.raises(ValueError, match="scheduled_time must be a non-negative"):
        await alarms.renew(-1)


# -- time -------------------------------------------------------------------------------


def test_virtual_clock_starts_at_documented_time() -> None:
    """`VirtualClock()` starts at 1_700_000_000_000 ms; `start_ms` sets another start."""
    assert VirtualClock().now_ms() == T0
    assert VirtualClock(start_ms=42).now_ms() == 42


async def test_now_ms_follows_the_virtual_clock_inside_a_runtime(host: Host) -> None:
    """`durability.now_ms()` reads the runtime's virtual clock, moved only by advance."""
    assert await host.stub.now() == T0
    assert durability.now_ms() == T0
    await host.clock.advance(1_234)
    assert await host.stub.now() == T0 + 1_234
    await host.clock.advance_to(T0 + 10_000)
    assert durability.now_ms() == host.clock.now_ms() == T0 + 10_000


# -- operations -------------------------------------------------------------------------


async def test_operation_results_by_status(host: Host) -> None:
    """`get_result` reports not_found, pending, completed and failed with their fields."""

    def charge(call: DurableCall) -> Any:
        if call.payload == "stop":
            raise NonRetryableError("card declined")
        if call.payload == "flaky" and call.attempt == 1:
            raise RuntimeError("try later")
        return {"id": call.id, "attempt": call.attempt}

    operations = Durability(context=host.ctx, handlers={"charge": charge})
    assert operations.operation("charge") is operations.charge
    assert await operations.charge.get_result("none") == OperationResult(status="not_found")
    await operations.charge(id="ok", payload="fine")
    await operations.charge(id="stop", payload="stop")
    await operations.charge(id="flaky", payload="flaky")
    await host.clock.run_until_idle()
    assert await operations.charge.job("ok").wait(timeout_ms=1) == OperationResult(
        status="completed", result={"id": "ok", "attempt": 1}, attempt=1
    )
    assert await operations.charge.get_result("stop") == OperationResult(
        status="failed", attempt=1, error=SerializedError("NonRetryableError", "card declined")
    )
    pending = await operations.charge.get_result("flaky")
    assert (pending.status, pending.attempt, pending.last_error) == ("pending", 1, "try later")
    assert pending.next_attempt_at is not None
    assert T0 + 500 <= pending.next_attempt_at <= T0 + 1000


async def test_id_of_another_operation_raises_duplicate(host: Host) -> None:
    """Registering an id that belongs to another operation raises and writes nothing."""
    operations = Durability(context=host.ctx, handlers={"charge": _noop, "refund": _noop})
    await operations.charge(id="inv-1", payload=None)
    with pytest.raises(DuplicateDurableCallError, match='belongs to operation "charge"'):
        await operations.refund(id="inv-1", payload=None)
    with pytest.raises(DuplicateDurableCallError):
        await operations.refund.get_result("inv-1")


async def test_attempt_timeout_aborts_the_signal_and_cancels_the_handler(host: Host) -> None:
    """On timeout the signal is aborted with the timeout error and the task is cancelled."""
    signals: list[AbortSignal] = []
    cancelled: list[bool] = []

    async def slow(call: DurableCall) -> None:
        signals.append(call.signal)
        try:
            await call.signal.wait()
            await asyncio.sleep(60)
        except BaseException:
            cancelled.append(True)
            raise

    operations = Durability(
        context=host.ctx,
        handlers={"slow": slow},
        attempt_timeout_ms=1000,
        retries=RetryPolicy(max_attempts=1),
    )
    await operations.slow(id="a", payload=None)
    await host.clock.advance(1000)
    signal = signals[0]
    assert signal.aborted
    assert isinstance(signal.reason, DurableAttemptTimeoutError)
    with pytest.raises(DurableAttemptTimeoutError):
        signal.raise_if_aborted()
    assert await signal.wait() is signal.reason
    assert cancelled == [True]
    result = await operations.slow.get_result("a")
    assert result.status == "failed"
    assert result.error == SerializedError(
        "DurableAttemptTimeoutError", 'Durable operation "slow" timed out after 1000ms'
    )


async def test_lifecycle_events_are_frozen_dataclasses(host: Host) -> None:
    """Hooks get frozen events with `type` and `entity_kind`; a raising hook changes nothing."""
    events: list[Any] = []

    def hook(event: Any) -> None:
        events.append(event)
        raise RuntimeError("hook broke")

    scheduler = DurabilityScheduler(context=host.ctx)
    operations = Durability(
        scheduler=scheduler, handlers={"charge": _noop}, on_lifecycle_event=hook
    )
    alarms = DurabilityAlarms(
        scheduler=scheduler, handlers={"renew": _noop}, on_lifecycle_event=hook
    )
    await operations.charge(id="a", payload=None)
    await alarms.renew(T0)
    await host.clock.run_until_idle()
    await operations.purge_before(T0 + 1)
    assert (await operations.charge.get_result("a")).status == "not_found"
    kinds = {(type(e), e.type, e.entity_kind) for e in events}
    assert {
        (RegisteredEvent, "registered", "operation"),
        (AttemptStartedEvent, "attempt_started", "operation"),
        (AttemptSettledEvent, "attempt_settled", "operation"),
        (ScheduledEvent, "scheduled", "named_alarm"),
        (PurgedEvent, "purged", "operation"),
    } <= kinds
    for event in events:
        assert type(event).__dataclass_params__.frozen
    assert TerminalEvent.__dataclass_params__.frozen  # type: ignore[attr-defined]


# -- log --------------------------------------------------------------------------------


async def test_log_definite_rejections_come_back_as_enqueue_results(host: Host) -> None:
    """Empty, oversize and empty-key appends return success=False with a LogAppendError."""
    log = DurabilityLog(context=host.ctx, max_batch_size=2)
    cases = [
        ([], "Append requires at least one record"),
        ([LogAppendInput(1), LogAppendInput(2), LogAppendInput(3)], "exceeds maxBatchSize 2"),
        ([LogAppendInput(1, deduplication_key="")], "must be non-empty"),
    ]
    for records, message in cases:
        result = await log.append(records)
        assert (result.success, result.value) == (False, None)
        assert isinstance(result.error, SerializedError)
        assert result.error.name == "LogAppendError"
        assert message in result.error.message
        assert isinstance(result.load, LoadSnapshot)
    assert (await log.bounds()).next_offset == 0
    accepted = await log.append([LogAppendInput("a"), LogAppendInput("b")])
    assert (accepted.success, accepted.value, accepted.error) == (True, [0, 1], None)


async def test_log_read_below_oldest_raises_truncated(host: Host) -> None:
    """Reading a trimmed offset raises LogTruncatedError with both offsets."""
    log = DurabilityLog(context=host.ctx, retention=LogRetention(max_records=1))
    await log.append([LogAppendInput(n) for n in range(3)])
    assert await log.trim() == 2
    with pytest.raises(LogTruncatedError) as raised:
        await log.read(0)
    assert (raised.value.requested_offset, raised.value.oldest_offset) == (0, 2)
    page = await log.read(2)
    assert [r.body for r in page.records] == [2]
    assert (page.next_offset, page.lag) == (3, 0)


async def test_log_ack_of_unknown_batch_raises_lease_error(host: Host) -> None:
    """An ack of a batch that is not held raises LogLeaseError naming it."""
    log = DurabilityLog(context=host.ctx, leases=LogLeaseOptions())
    with pytest.raises(LogLeaseError) as raised:
        await log.ack("workers", "nope")
    assert raised.value.batch_id == "nope"


def test_max_log_bytes_is_one_gib() -> None:
    """`MAX_LOG_BYTES` is 1 GiB and is the largest allowed `max_bytes`."""
    assert MAX_LOG_BYTES == 1 << 30
    assert LogRetention(max_bytes=MAX_LOG_BYTES).max_bytes == MAX_LOG_BYTES


async def test_file_cold_storage_round_trip(tmp_path: Path) -> None:
    """`FileColdStorage` returns a non-empty locator, reads the records back, None if gone."""
    cold = FileColdStorage(tmp_path / "cold")
    segment = LogSegment(0, 1, [LogRecord(0, "k0", {"a": 1}, T0), LogRecord(1, "k1", "b", T0)])
    locator = await cold.write(segment)
    assert isinstance(locator, str) and locator
    assert await cold.read(locator) == segment.records
    assert await cold.write(segment) == locator
    assert await cold.read("00000000000000000099.json") is None


# -- runtime ----------------------------------------------------------------------------


async def test_stub_calls_public_methods_only(host: Host) -> None:
    """Stubs call public methods with JSON copies; other names raise AttributeError."""
    value = {"a": [1, 2.5, None, True, "x"]}
    assert await host.stub.echo(value) == value
    with pytest.raises(KeyError, match="missing"):
        await host.stub.fail()
    for name in ("_hidden", "no_such_method", "probe"):
        with pytest.raises(AttributeError):
            await getattr(host.stub, name)()


async def test_env_namespaces_and_ids(host: Host) -> None:
    """Bindings become namespaces or pass through; ids are stable 64-hex with a name."""
    runtime = host.runtime
    assert runtime.env.PROBE is host.probe
    assert runtime.env["PROBE"] is host.probe
    namespace = runtime.namespace("OBJ")
    object_id = namespace.id_from_name("contract")
    assert object_id == runtime.env.OBJ.id_from_name("contract")
    assert re.fullmatch("[0-9a-f]{64}", str(object_id))
    assert object_id.name == "contract"
    assert str(host.ctx.id) == str(object_id)
    unique = namespace.new_unique_id()
    assert unique.name is None
    assert str(unique) != str(object_id)
    assert await namespace.get(object_id).now() == T0


async def test_runtime_without_arguments_is_empty_and_in_memory() -> None:
    """`Runtime()` starts with no bindings and needs no path."""
    async with Runtime() as runtime:
        assert list(runtime.env) == []


async def test_sql_cursor_surface(host: Host) -> None:
    """`sql.exec` returns a cursor with rows as dicts, raw tuples, names and counters."""
    sql = host.ctx.storage.sql
    sql.exec("CREATE TABLE t (k TEXT, v INTEGER)")
    assert sql.exec("INSERT INTO t VALUES (?, ?), (?, ?)", "a", 1, "b", 2).rows_written == 2
    cursor = sql.exec("SELECT k, v FROM t ORDER BY k")
    assert cursor.column_names == ["k", "v"]
    assert list(cursor) == [{"k": "a", "v": 1}, {"k": "b", "v": 2}]
    assert cursor.rows_read == 2
    assert sql.exec("SELECT k, v FROM t ORDER BY k").to_list()[1] == {"k": "b", "v": 2}
    assert list(sql.exec("SELECT k, v FROM t ORDER BY k").raw()) == [("a", 1), ("b", 2)]
    assert sql.exec("SELECT v FROM t WHERE k = ?", "b").one() == {"v": 2}
    with pytest.raises(ValueError):
        sql.exec("SELECT v FROM t").one()
    for statement in ("BEGIN", "COMMIT", "SAVEPOINT s"):
        with pytest.raises(ValueError):
            sql.exec(statement)


async def test_transactions_roll_back_on_exception(host: Host) -> None:
    """`transaction_sync` and `transaction` are atomic and re-raise the error."""
    storage = host.ctx.storage
    storage.sql.exec("CREATE TABLE t (v INTEGER)")

    def sync_body() -> None:
        storage.sql.exec("INSERT INTO t VALUES (1)")
        raise LookupError("undo")

    async def async_body(txn: Any) -> None:
        await txn.put("k", 1)
        await txn.set_alarm(T0 + 1000)
        raise LookupError("undo")

    async def committed(txn: Any) -> int | None:
        await txn.put("k", 2)
        await txn.set_alarm(T0 + 2000)
        alarm: int | None = await txn.get_alarm()
        return alarm

    with pytest.raises(LookupError):
        storage.transaction_sync(sync_body)
    with pytest.raises(LookupError):
        await storage.transaction(async_body)
    assert storage.sql.exec("SELECT count(*) AS n FROM t").one() == {"n": 0}
    assert (await storage.get("k"), await storage.get_alarm()) == (None, None)
    assert storage.transaction_sync(lambda: 7) == 7
    assert await storage.transaction(committed) == T0 + 2000
    assert await storage.get("k") == 2


async def test_kv_methods_and_delete_all(host: Host) -> None:
    """KV get/put/delete/list behave as documented; delete_all leaves the object as new."""
    storage = host.ctx.storage
    for key, value in (("a:1", 1), ("a:2", [2]), ("b", {"c": None})):
        await storage.put(key, value)
    assert await storage.get("a:2") == [2]
    assert await storage.list() == {"a:1": 1, "a:2": [2], "b": {"c": None}}
    assert await storage.list(prefix="a:", limit=1) == {"a:1": 1}
    assert (await storage.delete("b"), await storage.delete("b")) == (True, False)
    storage.sql.exec("CREATE TABLE t (v INTEGER)")
    await storage.set_alarm(T0 + 60_000)
    await storage.delete_all()
    assert await storage.list() == {}
    assert await storage.get_alarm() is None
    assert storage.sql.exec("SELECT name FROM sqlite_master WHERE name = 't'").to_list() == []


async def test_failing_alarm_is_retried_six_times_from_two_seconds(host: Host) -> None:
    """A raising `alarm()` is retried after 2, 4, 8, 16, 32, 64 s, then dropped."""
    host.probe.fail_alarms = True
    await host.ctx.storage.set_alarm(T0 + 1000)
    await host.clock.advance(1000 + 126_000 + 600_000)
    calls = [(at - T0 - 1000, info.retry_count, info.is_retry) for at, info in host.probe.alarms]
    assert calls == [
        (0, 0, False),
        (2_000, 1, True),
        (6_000, 2, True),
        (14_000, 3, True),
        (30_000, 4, True),
        (62_000, 5, True),
        (126_000, 6, True),
    ]
    await host.stub.now()
    assert await host.ctx.storage.get_alarm() is None


async def test_evict_keeps_committed_data_and_alarm(host: Host) -> None:
    """After `evict` (by stub or id) the next call builds an instance that sees data and alarm."""
    old = host.ctx
    await old.storage.put("k", "v")
    await old.storage.set_alarm(T0 + 30_000)
    await host.runtime.evict(host.stub)
    await host.stub.now()
    assert host.ctx is not old
    await host.runtime.evict(host.stub.id)
    await host.stub.now()
    assert host.ctx is not old
    assert await host.ctx.storage.get("k") == "v"
    assert await host.ctx.storage.get_alarm() == T0 + 30_000


async def test_request_and_response_mirror_workers() -> None:
    """`Request` exposes method/url/headers/text()/json(); `Response` status and json()."""
    request = Request("http://host/path", method="POST", body='{"q": 1}')
    assert (request.method, request.url) == ("POST", "http://host/path")
    assert await request.text() == '{"q": 1}'
    assert await request.json() == {"q": 1}
    assert Response("hi").status == 200
    assert Response("gone", status=404).status == 404
    assert Response.json({"a": 1}).status == 200
    assert Response.json({"a": 1}, status=201).status == 201
    assert isinstance(AlarmInvocationInfo(retry_count=1, is_retry=True).retry_count, int)


async def test_runtime_on_a_path_finds_objects_data_and_due_alarms(tmp_path: Path) -> None:
    """A new Runtime on the same path finds the data; an alarm that came due fires at start."""
    probe = SimpleNamespace(ctx=None, alarms=[], fail_alarms=False)
    bindings = {"OBJ": Holder, "PROBE": probe}
    clock = VirtualClock()
    async with Runtime(path=tmp_path, bindings=bindings, clock=clock) as runtime:
        await runtime.env.OBJ.get_by_name("kept").now()
        await probe.ctx.storage.put("k", "v")
        await probe.ctx.storage.set_alarm(T0 + 10_000)
    later = VirtualClock(start_ms=T0 + 60_000)
    async with Runtime(path=tmp_path, bindings=bindings, clock=later) as runtime:
        await later.run_until_idle()
        assert [at for at, _ in probe.alarms] == [T0 + 60_000]
        await runtime.env.OBJ.get_by_name("kept").now()
        assert await probe.ctx.storage.get("k") == "v"
        assert await probe.ctx.storage.get_alarm() is None
