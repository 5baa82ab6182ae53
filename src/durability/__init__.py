"""durability: durable, crash-safe building blocks for per-entity actors."""

from __future__ import annotations

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

__all__ = [  # noqa: RUF022 - plain sorted() order, pinned by tests/test_exports.py
    "DuplicateDurableCallError",
    "DurabilityError",
    "DurabilityLog",
    "DurableAlarmTimeoutError",
    "DurableAttemptTimeoutError",
    "DurableAttemptsExhaustedError",
    "DurableResultSerializationError",
    "DurableRetryPolicyError",
    "EnqueueResult",
    "FanoutEnqueueError",
    "FanoutSettlementError",
    "FanoutTimeoutError",
    "LATEST",
    "LeaseRow",
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
    "MigrationResult",
    "NonRetryableError",
    "RoutingError",
    "RoutingLoad",
    "SerializedError",
    "now_ms",
]
