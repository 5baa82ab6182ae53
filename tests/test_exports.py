"""The public surface of `durability` is a decision: this pins it name by name."""

from __future__ import annotations

import inspect

import pytest

import durability

EXPECTED = [
    "AbortSignal",
    "AlarmMethodOptions",
    "AlarmRetryInfo",
    "AttemptSettledEvent",
    "AttemptStartedEvent",
    "DuplicateDurableCallError",
    "Durability",
    "DurabilityAlarms",
    "DurabilityError",
    "DurabilityFanout",
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
    "FanoutInput",
    "FanoutMessage",
    "FanoutSettlementError",
    "FanoutTarget",
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
    "MessageWrite",
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
    "StoredFailure",
    "StoredMessage",
    "TerminalEvent",
    "exponential",
    "jitter",
    "now_ms",
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
    assert len(errors) == 15
    assert all(issubclass(error, durability.DurabilityError) for error in errors)
