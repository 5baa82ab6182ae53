"""durability: durable, crash-safe building blocks for per-entity actors."""

from __future__ import annotations

from ._alarms import DurabilityAlarms, DurableAlarmInfo
from ._clock import now_ms
from ._errors import (
    DuplicateDurableCallError,
    DurabilityError,
    DurableAlarmTimeoutError,
    DurableAttemptsExhaustedError,
    DurableAttemptTimeoutError,
    DurableResultSerializationError,
    DurableRetryPolicyError,
    FanoutEnqueueError,
    FanoutSettlementError,
    FanoutTimeoutError,
    LogAppendError,
    LogLeaseError,
    LogTruncatedError,
    NonRetryableError,
    RoutingError,
    SerializedError,
)
from ._lifecycle import (
    AttemptSettledEvent,
    AttemptStartedEvent,
    LifecycleEvent,
    PurgedEvent,
    RegisteredEvent,
    ScheduledEvent,
    TerminalEvent,
)
from ._load import EnqueueResult, LoadSnapshot, RoutingLoad
from ._log import DurabilityLog
from ._log_types import (
    MAX_LOG_BYTES,
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
from ._migrations import LATEST, MigrationResult
from ._operations import Durability, DurableCall, OperationResult
from ._policy import AlarmMethodOptions, MethodOptions, RetryPolicy, exponential, jitter
from ._scheduler import AlarmRetryInfo, DurabilityScheduler
from ._signal import AbortSignal

__all__ = [  # noqa: RUF022 - plain sorted() order, pinned by tests/test_exports.py
    "AbortSignal",
    "AlarmMethodOptions",
    "AlarmRetryInfo",
    "AttemptSettledEvent",
    "AttemptStartedEvent",
    "DuplicateDurableCallError",
    "Durability",
    "DurabilityAlarms",
    "DurabilityError",
    "DurabilityLog",
    "DurabilityScheduler",
    "DurableAlarmInfo",
    "DurableAlarmTimeoutError",
    "DurableAttemptTimeoutError",
    "DurableAttemptsExhaustedError",
    "DurableCall",
    "DurableResultSerializationError",
    "DurableRetryPolicyError",
    "EnqueueResult",
    "FanoutEnqueueError",
    "FanoutSettlementError",
    "FanoutTimeoutError",
    "LATEST",
    "LeaseRow",
    "LifecycleEvent",
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
    "MethodOptions",
    "MigrationResult",
    "NonRetryableError",
    "OperationResult",
    "PurgedEvent",
    "RegisteredEvent",
    "RetryPolicy",
    "RoutingError",
    "RoutingLoad",
    "ScheduledEvent",
    "SerializedError",
    "TerminalEvent",
    "exponential",
    "jitter",
    "now_ms",
]
