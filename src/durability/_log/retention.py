"""Which of the oldest hot records `trim()` removes: a pure function of sizes and times."""

from __future__ import annotations

from collections.abc import Sequence

from .types import LogRetention


def retention_prefix(
    oldest: Sequence[tuple[int, int]],
    *,
    retention: LogRetention,
    hot_count: int,
    total_bytes: int,
    now: int,
) -> int:
    """How many of `oldest` retention removes (they are always a prefix).

    `oldest` holds the oldest hot records' `(bytes, appended_at)`, oldest first, out of
    `hot_count` hot records holding `total_bytes`. A record goes when any rule holds:
    it is within the records beyond `max_records`, the bytes still held before it
    exceed `max_bytes`, or it was appended strictly before `now - max_age_ms`. The
    first record no rule removes ends the prefix, so newer records never leave first.
    """
    excess = 0 if retention.max_records is None else hot_count - retention.max_records
    over_bytes = 0 if retention.max_bytes is None else total_bytes - retention.max_bytes
    cutoff = None if retention.max_age_ms is None else now - retention.max_age_ms
    for index, (size, appended_at) in enumerate(oldest):
        expired = cutoff is not None and appended_at < cutoff
        if not (index < excess or over_bytes > 0 or expired):
            return index
        over_bytes -= size
    return len(oldest)
