"""`AlarmInvocationInfo`: what a host passes to `alarm()`, under both spellings.

The embedded runtime builds it for every alarm call and the Cloudflare adapter converts
Cloudflare's `retryCount`/`isRetry` info into it, so `alarm()` reads the same on both.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AlarmInvocationInfo:
    """Passed to `alarm()`: how many times this alarm was already retried."""

    retry_count: int
    """0 on the first call; then how many retries followed a raising `alarm()` (1 to 6
    on the embedded runtime)."""
    is_retry: bool
    """True when `retry_count > 0`."""

    @property
    def retryCount(self) -> int:
        """`retry_count` under its Cloudflare name."""
        return self.retry_count

    @property
    def isRetry(self) -> bool:
        """`is_retry` under its Cloudflare name."""
        return self.is_retry
