"""The public surface of `durability` is a decision: this pins it name by name."""

from __future__ import annotations

import inspect
import typing

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
    "DurabilityLog",
    "DurabilityScheduler",
    "DurableAlarmInfo",
    "DurableAlarmTimeoutError",
    "DurableAttemptTimeoutError",
    "DurableAttemptsExhaustedError",
    "DurableCall",
    "DurableJob",
    "DurableOperation",
    "DurableResultSerializationError",
    "DurableRetryPolicyError",
    "EnqueueResult",
    "FanoutEnqueueError",
    "FanoutSettlementError",
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
    "MethodOptions",
    "MigrationResult",
    "NamedAlarm",
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
