"""Durations and step configs as workflows read them, with Cloudflare's defaults."""

from __future__ import annotations

import pytest

from durability._workflows.durations import (
    DEFAULT_CONFIG,
    duration_ms,
    resolve_config,
    retry_delay_ms,
    timeout_ms,
)


@pytest.mark.parametrize(
    ("given", "ms"),
    [
        (1500, 1500),
        (2.4, 2),
        ("750", 750),
        ("500 ms", 500),
        ("1 millisecond", 1),
        ("10 seconds", 10_000),
        ("1 second", 1_000),
        ("1.5 hours", 5_400_000),
        ("2 days", 172_800_000),
        ("1 week", 604_800_000),
        ("1 month", 2_592_000_000),
        ("1 year", 31_557_600_000),
        (" 3   Minutes ", 180_000),
    ],
)
def test_durations_are_milliseconds_or_unit_strings(given: object, ms: int) -> None:
    """Numbers are milliseconds; strings are a number and a unit, singular or plural."""
    assert duration_ms("delay", given) == ms


@pytest.mark.parametrize(
    ("given", "error", "message"),
    [
        (True, TypeError, "delay must be milliseconds"),
        (None, TypeError, "delay must be milliseconds"),
        (-1, ValueError, "non-negative duration"),
        (float("inf"), ValueError, "non-negative duration"),
        ("soon", ValueError, 'like "10 seconds"'),
        ("3 fortnights", ValueError, "unknown unit 'fortnights'"),
        ("-2 days", ValueError, 'like "10 seconds"'),
    ],
)
def test_bad_durations_name_the_field(given: object, error: type, message: str) -> None:
    """What is not a duration raises, naming the field and the rule."""
    with pytest.raises(error, match=message):
        duration_ms("delay", given)


def test_a_config_is_merged_over_cloudflares_defaults() -> None:
    """5 retries, 10 s, exponential, 10 minutes: what a config leaves out."""
    assert resolve_config("s", None) == DEFAULT_CONFIG
    assert DEFAULT_CONFIG == {
        "retries": {"limit": 5, "delay": 10_000, "backoff": "exponential"},
        "timeout": "10 minutes",
    }
    merged = resolve_config("s", {"retries": {"limit": 1}, "timeout": "30 seconds"})
    assert merged == {
        "retries": {"limit": 1, "delay": 10_000, "backoff": "exponential"},
        "timeout": "30 seconds",
    }
    assert timeout_ms(merged) == 30_000


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"retry": {}}, "unknown key 'retry'"),
        ({"retries": {"tries": 1}}, "unknown key 'tries'"),
        ({"retries": {"limit": -1}}, 'retries.limit of step "s" must be a non-negative'),
        ({"retries": {"limit": 1.5}}, "retries.limit"),
        ({"retries": {"backoff": "fibonacci"}}, "must be one of constant, linear, exponential"),
        ({"retries": {"delay": "later"}}, 'retries.delay of step "s"'),
        ({"timeout": 0}, 'timeout of step "s" must be more than 0'),
    ],
)
def test_bad_configs_are_refused(config: dict[str, object], message: str) -> None:
    """A config with an unknown key or a bad value raises, naming the step and the field."""
    with pytest.raises(ValueError, match=message):
        resolve_config("s", config)


@pytest.mark.parametrize(
    ("backoff", "delays"),
    [
        ("constant", [1_000, 1_000, 1_000, 1_000]),
        ("linear", [1_000, 2_000, 3_000, 4_000]),
        ("exponential", [1_000, 2_000, 4_000, 8_000]),
    ],
)
def test_retry_delays_follow_the_backoff(backoff: str, delays: list[int]) -> None:
    """The wait after failed attempt n: delay, delay * n, or delay * 2 ** (n - 1)."""
    config = resolve_config("s", {"retries": {"limit": 4, "delay": "1 second", "backoff": backoff}})
    assert [retry_delay_ms(config, attempt) for attempt in range(1, 5)] == delays
