"""Retry policies, per-method options, and how a handler's effective policy is resolved.

A policy is a pure function `delay(attempt) -> ms` plus `max_attempts`: the engine asks
it for the delay after attempt `attempt` failed. Everything is validated once, when a
helper is constructed; an unusable delay at run time is a terminal
`DurableRetryPolicyError` rather than a crash.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from .._validate import check_callable, check_positive_int, check_utf8

DEFAULT_ATTEMPT_TIMEOUT_MS = 300_000
DEFAULT_MAX_ATTEMPTS = 5

DelayFunction = Callable[[int], float]
"""`delay(attempt) -> ms`: how long to wait after the 1-based `attempt` failed."""


def exponential(attempt: int, initial_delay_ms: int = 1000, max_delay_ms: int = 300_000) -> int:
    """`min(initial_delay_ms * 2 ** (attempt - 1), max_delay_ms)`."""
    exponent = max(attempt - 1, 0)
    if exponent >= 64:
        return max_delay_ms
    return int(min(initial_delay_ms * 2**exponent, max_delay_ms))


def jitter(delay_ms: float) -> float:
    """Equal jitter: a uniformly random delay in `[delay_ms / 2, delay_ms)`."""
    half = delay_ms / 2
    return half + random.random() * half


def default_delay(attempt: int) -> float:
    """The default backoff: equal-jittered exponential, 1 s doubling, capped at 300 s."""
    return jitter(exponential(attempt))


@dataclass(frozen=True, kw_only=True, slots=True)
class RetryPolicy:
    """How many attempts a record gets and how long to wait between them.

    `max_attempts` (default 5) counts every attempt, the first included, and attempts
    interrupted by eviction. `delay` (default `None`, meaning `default_delay`:
    equal-jittered exponential, 1 s doubling, capped at 300 s) maps the attempt that
    just failed to a delay in ms; a raise or a value that is not a finite non-negative
    number fails the record with `DurableRetryPolicyError`. `non_retryable` (default
    none) is a tuple of exception classes: an attempt raising an instance of one ends
    the record as failed at once, like `NonRetryableError`, so a vendor's exception
    needs no wrapping.
    """

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    delay: DelayFunction | None = None
    non_retryable: tuple[type[BaseException], ...] = ()

    def __post_init__(self) -> None:
        check_positive_int("max_attempts", self.max_attempts)
        if self.delay is not None:
            check_callable("delay", self.delay)
        if not isinstance(self.non_retryable, tuple):
            raise TypeError(
                "non_retryable must be a tuple of exception classes, "
                f"got {type(self.non_retryable).__name__}"
            )
        for item in self.non_retryable:
            if not (isinstance(item, type) and issubclass(item, BaseException)):
                raise TypeError(f"non_retryable must hold exception classes, got {item!r}")


@dataclass(frozen=True, kw_only=True, slots=True)
class MethodOptions:
    """Per-operation overrides; `None` inherits the helper's value.

    `attempt_timeout_ms` (default: the helper's) bounds each attempt; `retries`
    (default: the helper's) replaces the helper's whole `RetryPolicy` for this method.
    """

    attempt_timeout_ms: int | None = None
    retries: RetryPolicy | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class AlarmMethodOptions:
    """Per-named-alarm overrides; `None` inherits the helper's value.

    `retry_timeouts` (default False): a timed-out occurrence is failed terminally,
    because its side effect may have happened; set it for idempotent handlers.
    """

    attempt_timeout_ms: int | None = None
    retries: RetryPolicy | None = None
    retry_timeouts: bool = False


@dataclass(frozen=True, slots=True)
class AttemptPolicy:
    """The effective policy of one handler name, resolved at construction."""

    attempt_timeout_ms: int
    max_attempts: int
    delay: DelayFunction
    retry_timeouts: bool = False
    non_retryable: tuple[type[BaseException], ...] = ()


Options = TypeVar("Options", MethodOptions, AlarmMethodOptions)


def check_retry_policy(name: str, value: object) -> RetryPolicy:
    """`value` as a `RetryPolicy`, else `TypeError` naming the option."""
    if not isinstance(value, RetryPolicy):
        raise TypeError(f"{name} must be a RetryPolicy, got {type(value).__name__}")
    return value


def check_handlers(handlers: object, owner: type) -> dict[str, Callable[..., Any]]:
    """Validate a handler mapping: non-empty str names, callables, none a public attribute
    of the `owner` class (those names are reserved by it)."""
    if not isinstance(handlers, Mapping):
        raise TypeError(f"handlers must be a mapping, got {type(handlers).__name__}")
    reserved = {name for name in dir(owner) if not name.startswith("_")}
    checked: dict[str, Callable[..., Any]] = {}
    for name, handler in handlers.items():
        if not isinstance(name, str):
            raise TypeError(f"handler names must be strings, got {type(name).__name__}")
        if not name:
            raise ValueError("handler names must be non-empty")
        check_utf8("handler names", name)
        if name in reserved:
            raise ValueError(f'"{name}" is reserved by {owner.__name__}')
        check_callable(f"handlers.{name}", handler)
        checked[name] = handler
    return checked


def resolve_policies(
    *,
    attempt_timeout_ms: object,
    retries: object,
    methods: Mapping[str, Options] | None,
    options_type: type[Options],
) -> tuple[AttemptPolicy, dict[str, AttemptPolicy]]:
    """Validate the helper-level and per-method options.

    Returns the helper's default policy and the policy of every name in `methods`
    (entries for names without a handler are validated and otherwise unused).
    """
    timeout = check_positive_int("attempt_timeout_ms", attempt_timeout_ms)
    policy = check_retry_policy("retries", retries)
    if methods is None:
        methods = {}
    if not isinstance(methods, Mapping):
        raise TypeError(f"methods must be a mapping, got {type(methods).__name__}")
    overrides: dict[str, AttemptPolicy] = {}
    for method, options in methods.items():
        prefix = f"methods.{method}"
        if not isinstance(options, options_type):
            raise TypeError(
                f"{prefix} must be a {options_type.__name__}, got {type(options).__name__}"
            )
        method_timeout = timeout
        if options.attempt_timeout_ms is not None:
            method_timeout = check_positive_int(
                f"{prefix}.attempt_timeout_ms", options.attempt_timeout_ms
            )
        method_policy = policy
        if options.retries is not None:
            method_policy = check_retry_policy(f"{prefix}.retries", options.retries)
        retry_timeouts = False
        if isinstance(options, AlarmMethodOptions):
            if not isinstance(options.retry_timeouts, bool):
                raise TypeError(f"{prefix}.retry_timeouts must be a bool")
            retry_timeouts = options.retry_timeouts
        overrides[method] = AttemptPolicy(
            method_timeout,
            method_policy.max_attempts,
            method_policy.delay or default_delay,
            retry_timeouts,
            method_policy.non_retryable,
        )
    default = AttemptPolicy(
        timeout,
        policy.max_attempts,
        policy.delay or default_delay,
        non_retryable=policy.non_retryable,
    )
    return default, overrides
