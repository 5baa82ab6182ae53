"""The values `DurabilityLog` takes and returns, and its option objects.

Every type is a frozen dataclass; option objects validate at construction so a bad
option fails where it is written, not on first use.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

from .._validate import check_callable, check_positive_int

Body = TypeVar("Body")

MAX_LOG_BYTES = 1_073_741_824
"""The largest `LogRetention.max_bytes` (1 GiB): room is left for other capabilities."""

LeaseState = Literal["active", "pending", "acked", "skipped"]


@dataclass(frozen=True, slots=True)
class LogAppendInput(Generic[Body]):
    """One record to append; a `deduplication_key` makes re-appending it idempotent."""

    body: Body
    deduplication_key: str | None = None
    """Reused offsets while the original record is hot; `None` draws a random key."""


@dataclass(frozen=True, slots=True)
class LogRecord(Generic[Body]):
    """A retained record: its offset, key, body and append time (ms)."""

    offset: int
    deduplication_key: str
    body: Body
    appended_at: int


@dataclass(frozen=True, slots=True)
class LogPage(Generic[Body]):
    """One read: the records, where to read next, and how far that is behind the head."""

    records: list[LogRecord[Body]]
    next_offset: int
    lag: int


@dataclass(frozen=True, slots=True)
class LogBounds:
    """Where the log starts (readable, and still in the object) and where it ends."""

    oldest_offset: int
    """The lowest readable offset, counting flushed segments; `next_offset` if none."""
    hot_offset: int
    """The lowest offset still held in the object; `next_offset` if none."""
    next_offset: int
    """The offset the next appended record receives."""


@dataclass(frozen=True, slots=True)
class LogSegment(Generic[Body]):
    """A contiguous run of records flushed together to cold storage, oldest first."""

    first_offset: int
    last_offset: int
    records: list[LogRecord[Body]]


@runtime_checkable
class LogColdStorage(Protocol):
    """Where `trim()` flushes records so they stay readable.

    `write` is called at least once per segment (a crash can repeat it), so never
    overwrite a segment. Offsets restart after `delete_all()` and several objects may
    share a store: key segments by `durability.cold.current_log_id()` and their
    offsets. `read` returns `None` when the segment is gone; the log then reports
    truncation, never a gap.
    """

    async def write(self, segment: LogSegment[Any]) -> str: ...

    async def read(self, locator: str) -> list[LogRecord[Any]] | None: ...


def _optional_positive(name: str, value: int | None) -> None:
    if value is not None:
        check_positive_int(name, value)


@dataclass(frozen=True, slots=True, kw_only=True)
class LogRetention:
    """What `trim()` removes, oldest first: records older, beyond a count or a byte budget.

    Each field is off when `None`. `max_bytes` counts the stored JSON envelope of
    each hot record and is at most `MAX_LOG_BYTES`.
    """

    max_age_ms: int | None = None
    max_records: int | None = None
    max_bytes: int | None = None

    def __post_init__(self) -> None:
        _optional_positive("retention.max_age_ms", self.max_age_ms)
        _optional_positive("retention.max_records", self.max_records)
        _optional_positive("retention.max_bytes", self.max_bytes)
        if self.max_bytes is not None and self.max_bytes > MAX_LOG_BYTES:
            raise ValueError(f"retention.max_bytes must not exceed {MAX_LOG_BYTES} bytes")


@dataclass(frozen=True, slots=True)
class LogLease(Generic[Body]):
    """A range of records held by one worker of a consumer until ack, nack or expiry."""

    batch_id: str
    consumer: str
    records: list[LogRecord[Body]]
    first_offset: int
    last_offset: int
    attempt: int
    """1-based delivery count of this range."""
    expires_at: int


PoisonHandler = Callable[[LogLease[Any]], Awaitable[None] | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class LogLeaseOptions:
    """Consumer leases: parallel ranges per consumer, lease length, poison handling.

    `max_parallelism` defaults to 1 and `lease_ms` to 30000. `max_attempts` takes
    effect only with `on_poison`: without somewhere to send a range that keeps
    failing, it is redelivered forever rather than dropped.
    """

    max_parallelism: int = 1
    lease_ms: int = 30_000
    max_attempts: int | None = None
    on_poison: PoisonHandler | None = None

    def __post_init__(self) -> None:
        check_positive_int("leases.max_parallelism", self.max_parallelism)
        check_positive_int("leases.lease_ms", self.lease_ms)
        _optional_positive("leases.max_attempts", self.max_attempts)
        if self.on_poison is not None:
            check_callable("leases.on_poison", self.on_poison)


@dataclass(frozen=True, slots=True)
class LeaseRow:
    """A stored lease range, as `DurabilityLog.leases()` shows it to operators and tests."""

    batch_id: str
    consumer: str
    first_offset: int
    last_offset: int
    state: LeaseState
    attempt: int
    expires_at: int
    created_at: int
