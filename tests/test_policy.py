"""Retry policies, method options and their validation."""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Any

import pytest

from conftest import LiveObject, noop
from durability import (
    AlarmMethodOptions,
    Durability,
    DurabilityAlarms,
    MethodOptions,
    RetryPolicy,
    exponential,
    jitter,
)
from durability._engine.policy import check_handlers, default_delay, resolve_policies


def test_exponential_doubles_from_initial_and_caps() -> None:
    """exponential(n) is initial * 2**(n-1), capped at max_delay_ms."""
    assert [exponential(n) for n in range(1, 6)] == [1000, 2000, 4000, 8000, 16000]
    assert exponential(10) == 300_000
    assert exponential(1_000) == 300_000
    assert exponential(3, initial_delay_ms=10, max_delay_ms=35) == 35
    assert exponential(2, initial_delay_ms=10, max_delay_ms=35) == 20


@pytest.mark.parametrize(
    ("attempt", "options", "expected"),
    [
        (9, {}, 256_000),
        (200, {}, 300_000),
        (3, {"initial_delay_ms": 100}, 400),
        (5, {"initial_delay_ms": 100, "max_delay_ms": 1000}, 1000),
    ],
)
def test_exponential(attempt: int, options: dict[str, int], expected: int) -> None:
    """`exponential` is `min(initial_delay_ms * 2 ** (attempt - 1), max_delay_ms)`."""
    assert exponential(attempt, **options) == expected


def test_jitter_stays_in_the_upper_half() -> None:
    """Equal jitter picks a delay in [delay/2, delay)."""
    random.seed(7)
    samples = [jitter(1000) for _ in range(2000)]
    assert all(500 <= sample < 1000 for sample in samples)
    assert min(samples) < 550 and max(samples) > 950


@pytest.mark.parametrize(("draw", "expected"), [(0.0, 500.0), (0.5, 750.0), (0.998, 999.0)])
def test_jitter_is_equal_jitter(
    monkeypatch: pytest.MonkeyPatch, draw: float, expected: float
) -> None:
    """`jitter(d)` is `d/2 + random() * d/2`: uniformly in `[d/2, d)`."""
    monkeypatch.setattr(random, "random", lambda: draw)
    assert jitter(1000) == pytest.approx(expected)


def test_default_delay_is_jittered_exponential() -> None:
    """The default backoff after attempt n lies in [2**(n-1) s / 2, 2**(n-1) s)."""
    for attempt, base in [(1, 1000), (2, 2000), (4, 8000), (20, 300_000)]:
        for _ in range(50):
            assert base / 2 <= default_delay(attempt) < base


def test_retry_policy_defaults_and_is_frozen() -> None:
    """RetryPolicy() means 5 attempts and the default delay; it cannot be mutated."""
    policy = RetryPolicy()
    assert policy.max_attempts == 5
    assert policy.delay is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.max_attempts = 3  # type: ignore[misc]


@pytest.mark.parametrize("value", [0, -1, 2**53])
def test_retry_policy_rejects_bad_max_attempts(value: int) -> None:
    """max_attempts below 1 (or unsafe) is a ValueError naming the field."""
    with pytest.raises(ValueError, match="max_attempts must be a positive integer"):
        RetryPolicy(max_attempts=value)


def test_retry_policy_rejects_wrong_types() -> None:
    """A non-int max_attempts or a non-callable delay is a TypeError."""
    with pytest.raises(TypeError, match="max_attempts"):
        RetryPolicy(max_attempts=2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="delay must be callable"):
        RetryPolicy(delay=5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
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


class CardDeclinedError(Exception):
    """A vendor's exception the policy names as non-retryable."""


def test_retry_policy_non_retryable_is_a_tuple_of_exception_classes() -> None:
    """non_retryable defaults to () and takes only a tuple of exception classes."""
    assert RetryPolicy().non_retryable == ()
    assert RetryPolicy(non_retryable=(CardDeclinedError, KeyError)).non_retryable == (
        CardDeclinedError,
        KeyError,
    )
    with pytest.raises(TypeError, match="non_retryable must be a tuple of exception classes"):
        RetryPolicy(non_retryable=[CardDeclinedError])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="non_retryable must be a tuple of exception classes"):
        RetryPolicy(non_retryable=CardDeclinedError)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="non_retryable must hold exception classes, got 'x'"):
        RetryPolicy(non_retryable=("x",))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="non_retryable must hold exception classes"):
        RetryPolicy(non_retryable=(int,))  # type: ignore[arg-type]


def test_resolution_carries_non_retryable_per_method() -> None:
    """The helper's non_retryable applies by default; a method's retries replace it."""
    default, overrides = resolve_policies(
        attempt_timeout_ms=1_000,
        retries=RetryPolicy(non_retryable=(CardDeclinedError,)),
        methods={"own": MethodOptions(retries=RetryPolicy()), "same": MethodOptions()},
        options_type=MethodOptions,
    )
    assert default.non_retryable == (CardDeclinedError,)
    assert overrides["same"].non_retryable == (CardDeclinedError,)
    assert overrides["own"].non_retryable == ()


def test_resolution_merges_method_overrides() -> None:
    """A method's timeout and policy override the helper's; other names get the defaults."""

    def fixed(attempt: int) -> int:
        return 42

    default, overrides = resolve_policies(
        attempt_timeout_ms=1_000,
        retries=RetryPolicy(max_attempts=3, delay=fixed),
        methods={
            "slow": MethodOptions(attempt_timeout_ms=9_000),
            "once": MethodOptions(retries=RetryPolicy(max_attempts=1)),
        },
        options_type=MethodOptions,
    )
    assert (default.attempt_timeout_ms, default.max_attempts, default.delay) == (1_000, 3, fixed)
    assert (overrides["slow"].attempt_timeout_ms, overrides["slow"].max_attempts) == (9_000, 3)
    assert overrides["slow"].delay is fixed
    assert (overrides["once"].attempt_timeout_ms, overrides["once"].max_attempts) == (1_000, 1)
    assert overrides["once"].delay is default_delay


def test_resolution_reads_retry_timeouts_for_alarms() -> None:
    """AlarmMethodOptions.retry_timeouts reaches the resolved policy (default False)."""
    default, overrides = resolve_policies(
        attempt_timeout_ms=1_000,
        retries=RetryPolicy(),
        methods={"a": AlarmMethodOptions(retry_timeouts=True), "b": AlarmMethodOptions()},
        options_type=AlarmMethodOptions,
    )
    assert overrides["a"].retry_timeouts is True
    assert overrides["b"].retry_timeouts is False
    assert default.retry_timeouts is False


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"attempt_timeout_ms": 0}, ValueError, "attempt_timeout_ms must be a positive integer"),
        ({"attempt_timeout_ms": "5"}, TypeError, "attempt_timeout_ms must be an integer"),
        ({"retries": {"max_attempts": 2}}, TypeError, "retries must be a RetryPolicy"),
        (
            {"methods": {"x": MethodOptions(attempt_timeout_ms=-5)}},
            ValueError,
            "methods.x.attempt_timeout_ms must be a positive integer",
        ),
        (
            {"methods": {"x": {"attempt_timeout_ms": 5}}},
            TypeError,
            "methods.x must be a MethodOptions",
        ),
        (
            {"methods": {"x": MethodOptions(retries=3)}},  # type: ignore[arg-type]
            TypeError,
            "methods.x.retries must be a RetryPolicy",
        ),
        ({"methods": [("x", MethodOptions())]}, TypeError, "methods must be a mapping"),
    ],
)
def test_resolution_rejects_bad_options(
    kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    """Every bad option raises with a message naming it."""
    options: dict[str, object] = {"attempt_timeout_ms": 1_000, "retries": RetryPolicy()}
    options.update(kwargs)
    with pytest.raises(error, match=message):
        resolve_policies(
            attempt_timeout_ms=options["attempt_timeout_ms"],
            retries=options["retries"],
            methods=options.get("methods"),  # type: ignore[arg-type]
            options_type=MethodOptions,
        )


def test_alarm_retry_timeouts_must_be_bool() -> None:
    """A non-bool retry_timeouts is a TypeError naming the method."""
    with pytest.raises(TypeError, match=r"methods\.a\.retry_timeouts must be a bool"):
        resolve_policies(
            attempt_timeout_ms=1_000,
            retries=RetryPolicy(),
            methods={"a": AlarmMethodOptions(retry_timeouts=1)},  # type: ignore[arg-type]
            options_type=AlarmMethodOptions,
        )


RESERVED = [(Durability, name) for name in ("alarm", "purge_before", "operation", "migrate")] + [
    (DurabilityAlarms, name) for name in ("alarm", "purge_before", "named", "migrate")
]


@pytest.mark.parametrize(("cls", "name"), RESERVED, ids=[f"{c.__name__}.{n}" for c, n in RESERVED])
async def test_reserved_handler_name_raises(live: LiveObject, cls: type, name: str) -> None:
    """A handler named like a public attribute of its helper raises `ValueError`."""
    with pytest.raises(ValueError, match=re.escape(f'"{name}" is reserved by {cls.__name__}')):
        cls(context=live.ctx, handlers={name: noop})
    assert live.tables() == []


@pytest.mark.parametrize("name", ["alarm", "purge_before", "operation", "migrate"])
def test_public_names_of_durability_are_reserved(name: str) -> None:
    """A handler may not take the name of a public attribute of Durability."""
    with pytest.raises(ValueError, match=f'"{name}" is reserved by Durability'):
        check_handlers({name: lambda call: None}, Durability)


@pytest.mark.parametrize("name", ["alarm", "purge_before", "named", "migrate"])
def test_public_names_of_durability_alarms_are_reserved(name: str) -> None:
    """A handler may not take the name of a public attribute of DurabilityAlarms."""
    with pytest.raises(ValueError, match=f'"{name}" is reserved by DurabilityAlarms'):
        check_handlers({name: lambda info: None}, DurabilityAlarms)


def test_handlers_must_be_named_callables() -> None:
    """Handler maps need non-empty str names and callable values."""
    with pytest.raises(TypeError, match=r"handlers\.x must be callable"):
        check_handlers({"x": 5}, Durability)
    with pytest.raises(TypeError, match="handler names must be strings"):
        check_handlers({1: print}, Durability)
    with pytest.raises(ValueError, match="non-empty"):
        check_handlers({"": print}, Durability)
    with pytest.raises(TypeError, match="handlers must be a mapping"):
        check_handlers([print], Durability)
    assert check_handlers({"charge-invoice": print}, Durability) == {"charge-invoice": print}
