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
from ._migrations import LATEST, MigrationResult

__all__ = [  # noqa: RUF022 - plain sorted() order, pinned by tests/test_exports.py
    "DuplicateDurableCallError",
    "DurabilityError",
    "DurableAlarmTimeoutError",
    "DurableAttemptTimeoutError",
    "DurableAttemptsExhaustedError",
    "DurableResultSerializationError",
    "DurableRetryPolicyError",
    "FanoutEnqueueError",
    "FanoutSettlementError",
    "FanoutTimeoutError",
    "LATEST",
    "LogAppendError",
    "LogLeaseError",
    "LogTruncatedError",
    "MigrationResult",
    "NonRetryableError",
    "RoutingError",
    "SerializedError",
    "now_ms",
]
