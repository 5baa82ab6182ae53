"""Durations as workflows take them, and step configs with Cloudflare's defaults.

A duration is a number of milliseconds or a string such as ``"10 seconds"``,
``"1 hour"`` or ``"2.5 days"`` (units: ms, millisecond, second, minute, hour, day, week,
month = 30 days, year = 365.25 days; singular or plural). A step config is
``{"retries": {"limit", "delay", "backoff"}, "timeout"}``; what it leaves out comes from
the defaults: 5 retries 10 seconds apart, doubling, and 10 minutes per attempt.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from .._types import MAX_SAFE_INTEGER

DAY_MS = 86_400_000

_UNITS: dict[str, float] = {
    "ms": 1,
    "millisecond": 1,
    "second": 1_000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": DAY_MS,
    "week": 7 * DAY_MS,
    "month": 30 * DAY_MS,
    "year": 365.25 * DAY_MS,
}

_TEXT = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([a-zA-Z]+)?\s*$")

MAX_SLEEP_MS = 365 * DAY_MS
"""The longest `step.sleep` and `wait_for_event` timeout: one year, as on Cloudflare."""

BACKOFFS = ("constant", "linear", "exponential")

DEFAULT_CONFIG: dict[str, Any] = {
    "retries": {"limit": 5, "delay": 10_000, "backoff": "exponential"},
    "timeout": "10 minutes",
}
"""The step config Cloudflare Workflows applies to what a step's own config leaves out."""


def duration_ms(name: str, value: object) -> int:
    """`value` (ms or a duration string) as whole milliseconds; `ValueError` or `TypeError`
    naming `name` when it is not a duration."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(
            f'{name} must be milliseconds or a duration string like "10 seconds", '
            f"got {type(value).__name__}"
        )
    amount = _parse(name, value) if isinstance(value, str) else float(value)
    if not math.isfinite(amount) or amount < 0 or amount > MAX_SAFE_INTEGER:
        raise ValueError(f"{name} must be a non-negative duration, got {value!r}")
    return math.floor(amount + 0.5)


@functools.lru_cache(maxsize=256)
def _parse(name: str, text: str) -> float:
    found = _TEXT.match(text)
    if found is None:
        raise ValueError(
            f'{name} must be milliseconds or a duration like "10 seconds", got {text!r}'
        )
    number, unit = found.groups()
    if unit is None:
        return float(number)
    key = unit.lower()
    if key not in _UNITS and key.endswith("s"):
        key = key[:-1]
    if key not in _UNITS:
        units = ", ".join(_UNITS)
        raise ValueError(f"{name}: unknown unit {unit!r} in {text!r} (units: {units})")
    return float(number) * _UNITS[key]


def check_span(name: str, value: object) -> int:
    """A sleep or wait timeout: a duration of at most one year."""
    span = duration_ms(name, value)
    if span > MAX_SLEEP_MS:
        raise ValueError(f"{name} must be at most 365 days, got {value!r}")
    return span


def resolve_config(step: str, config: object) -> dict[str, Any]:
    """The step's full config: its own `config` merged over the defaults, checked.

    The values keep the form they were given in (``"10 seconds"`` stays a string):
    this is what the journal stores at the step's first attempt and the step's `ctx`
    shows. No config at all gives the shared `DEFAULTS` (never to be changed)."""
    if config is None:
        return DEFAULTS
    if not isinstance(config, Mapping):
        raise TypeError(f'config of step "{step}" must be a dict, got {type(config).__name__}')
    unknown = sorted(set(config) - {"retries", "timeout"})
    if unknown:
        raise ValueError(f'config of step "{step}" has an unknown key {unknown[0]!r}')
    retries = config.get("retries", {})
    if not isinstance(retries, Mapping):
        raise TypeError(f'config["retries"] of step "{step}" must be a dict')
    extra = sorted(set(retries) - {"limit", "delay", "backoff"})
    if extra:
        raise ValueError(f'config["retries"] of step "{step}" has an unknown key {extra[0]!r}')
    merged = {**DEFAULT_CONFIG["retries"], **retries}
    limit = merged["limit"]
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f'retries.limit of step "{step}" must be a non-negative integer')
    duration_ms(f'retries.delay of step "{step}"', merged["delay"])
    if merged["backoff"] not in BACKOFFS:
        raise ValueError(
            f'retries.backoff of step "{step}" must be one of {", ".join(BACKOFFS)}, '
            f"got {merged['backoff']!r}"
        )
    timeout = config.get("timeout", DEFAULT_CONFIG["timeout"])
    if duration_ms(f'timeout of step "{step}"', timeout) == 0:
        raise ValueError(f'timeout of step "{step}" must be more than 0')
    return {"retries": merged, "timeout": timeout}


DEFAULTS: dict[str, Any] = resolve_config("", {})
"""The resolved config of a step declared without one (checked once, shared)."""

_DEFAULTS_TEXT = json.dumps(DEFAULTS)


def config_text(config: Mapping[str, Any]) -> str:
    """A resolved config as the journal stores it (JSON)."""
    return _DEFAULTS_TEXT if config is DEFAULTS else json.dumps(config)


def timeout_ms(config: Mapping[str, Any]) -> int:
    """The attempt timeout of a resolved config."""
    return duration_ms("timeout", config["timeout"])


def retry_limit(config: Mapping[str, Any]) -> int:
    """How many retries a resolved config allows after the first attempt."""
    return int(config["retries"]["limit"])


def retry_delay_ms(config: Mapping[str, Any], attempt: int) -> int:
    """The wait after failed attempt `attempt` (from 1) under a resolved config."""
    retries = config["retries"]
    base = duration_ms("retries.delay", retries["delay"])
    backoff = retries["backoff"]
    if backoff == "exponential":
        delay = base * 2 ** (attempt - 1)
    elif backoff == "linear":
        delay = base * attempt
    else:
        delay = base
    return int(min(delay, MAX_SAFE_INTEGER))
