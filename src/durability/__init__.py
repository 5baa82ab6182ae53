"""durability: durable, crash-safe building blocks for per-entity actors."""

from __future__ import annotations

import inspect as _inspect
import typing as _typing

from ._alarms import (
    DurabilityAlarms,
    DurableAlarmInfo,
    NamedAlarm,
    NamedAlarmState,
    Recurrence,
)
from ._clock import now_ms
from ._cloudflare import CLOUDFLARE as _CLOUDFLARE
from ._context import Context, SqlCursor
from ._context import register_host as _register_host
from ._declare import Durable, named_alarm, operation
from ._engine import (
    LATEST,
    AlarmMethodOptions,
    AlarmRetryInfo,
    AttemptSettledEvent,
    AttemptStartedEvent,
    CancelledEvent,
    DurabilityScheduler,
    LifecycleEvent,
    LifecycleEventType,
    LifecycleHook,
    MethodOptions,
    MigrationResult,
    PurgedEvent,
    RegisteredEvent,
    RetriedEvent,
    RetryPolicy,
    ScheduledEvent,
    TerminalEvent,
    exponential,
    jitter,
)
from ._errors import (
    DuplicateDurableCallError,
    DurabilityError,
    DurableAlarmTimeoutError,
    DurableAttemptsExhaustedError,
    DurableAttemptTimeoutError,
    DurableCancelledError,
    DurableResultSerializationError,
    DurableRetryPolicyError,
    FanoutEnqueueError,
    FanoutSettlementError,
    FanoutTimeoutError,
    LogAppendError,
    LogLeaseError,
    LogTruncatedError,
    NonRetryableError,
    RetryAfter,
    RoutingError,
    SerializedError,
)
from ._fanout import (
    DurabilityFanout,
    FanoutInput,
    FanoutMessage,
    FanoutTarget,
    MessageWrite,
    StoredFailure,
    StoredMessage,
)
from ._load import EnqueueResult, LoadSnapshot, RoutingLoad
from ._log import (
    MAX_LOG_BYTES,
    DurabilityLog,
    LeaseRow,
    LogAppendInput,
    LogBounds,
    LogColdStorage,
    LogLease,
    LogLeaseOptions,
    LogPage,
    LogRecord,
    LogRetention,
    LogSegment,
)
from ._operations import Durability, DurableCall, DurableJob, DurableOperation, OperationResult
from ._signal import AbortSignal
from ._types import JsonValue
from ._workflows import (
    DurabilityWorkflows,
    Workflow,
    WorkflowDeterminismError,
    WorkflowEntrypoint,
    WorkflowError,
    WorkflowEvent,
    WorkflowInstance,
    WorkflowStep,
    WorkflowStepError,
    WorkflowTimeoutError,
    workflow,
)

__all__ = [  # noqa: RUF022 - plain sorted() order, pinned by tests/test_exports.py
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

# Classes and functions defined in private modules present themselves as `durability.X`
# (reprs, tracebacks, help), which is where users import them from. A class's own
# annotations are resolved first, in its defining module: `typing.get_type_hints` looks
# names up in `__module__`, which no longer holds the private names they use.
for _name in __all__:
    _value = globals()[_name]
    if isinstance(_value, type):
        _own = _inspect.get_annotations(_value)
        if _own:
            _hints = _typing.get_type_hints(_value, include_extras=True)
            _value.__annotations__ = {field: _hints[field] for field in _own}
    if isinstance(_value, type) or _inspect.isfunction(_value):
        _value.__module__ = __name__
del _name, _value, _own, _hints

# The one wiring between hosts and the engine: a raw Cloudflare `ctx` (or alarm info)
# given to a helper is adapted through this registration, so the engine never imports
# a host.
_register_host(_CLOUDFLARE)
