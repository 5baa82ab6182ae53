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

__all__ = [
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
    "LogAppendError",
    "LogLeaseError",
    "LogTruncatedError",
    "NonRetryableError",
    "RoutingError",
    "SerializedError",
    "now_ms",
]
