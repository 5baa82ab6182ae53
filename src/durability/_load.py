"""Local, advisory load telemetry and the result type of every durable enqueue.

`RoutingLoad` counts requests in flight and the completions of the last minute in
sixty one-second buckets per direction. It lives in memory only: eviction resets it,
which is fine because it steers routing decisions and never decides correctness.
Backlog (`pending_deliveries`) is always supplied by the caller from durable state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from ._clock import now_ms
from ._errors import SerializedError
from ._validate import check_non_negative_int

T = TypeVar("T")

Direction = Literal["inbound", "outbound"]

WINDOW_MS = 60_000
"""The span a snapshot's `completed` and `average_processing_ms` cover."""

_BUCKET_MS = 1_000
_BUCKETS = WINDOW_MS // _BUCKET_MS


@dataclass(frozen=True, slots=True)
class InboundLoad:
    """Requests a capability is serving: in flight now, and completed in the window."""

    in_flight: int
    completed: int
    average_processing_ms: float | None
    """Mean duration of the window's completions; `None` when there were none."""


@dataclass(frozen=True, slots=True)
class OutboundLoad:
    """Work a capability hands on, plus the durable backlog still waiting for it."""

    in_flight: int
    completed: int
    average_processing_ms: float | None
    """Mean duration of the window's completions; `None` when there were none."""
    pending_deliveries: int


@dataclass(frozen=True, slots=True)
class LoadSnapshot:
    """One observation of a capability's load, taken at `observed_at` (ms)."""

    observed_at: int
    window_ms: int
    inbound: InboundLoad
    outbound: OutboundLoad


@dataclass(frozen=True, slots=True)
class EnqueueResult(Generic[T]):
    """The outcome of a durable enqueue (`append`, `enqueue`, routed `push`).

    `success=True` means "durably accepted", never "processed". Definite input
    rejections come back as `success=False` with `error`; storage or transport
    uncertainty is raised instead, because the caller must retry.
    """

    success: bool
    value: T | None
    error: SerializedError | None
    load: LoadSnapshot


class _Bucket:
    """Completions and their summed duration for one absolute second."""

    __slots__ = ("completed", "duration_ms", "second")

    def __init__(self) -> None:
        self.second = -1
        self.completed = 0
        self.duration_ms = 0


class _DirectionLoad:
    """In-flight count and one minute of one-second buckets for one direction."""

    __slots__ = ("buckets", "in_flight")

    def __init__(self) -> None:
        self.in_flight = 0
        self.buckets = [_Bucket() for _ in range(_BUCKETS)]

    def record(self, now: int, duration_ms: int) -> None:
        second = now // _BUCKET_MS
        bucket = self.buckets[second % _BUCKETS]
        if bucket.second != second:
            bucket.second = second
            bucket.completed = 0
            bucket.duration_ms = 0
        bucket.completed += 1
        bucket.duration_ms += duration_ms

    def window(self, now: int) -> tuple[int, float | None]:
        second = now // _BUCKET_MS
        completed = 0
        duration = 0
        for bucket in self.buckets:
            if second - _BUCKETS < bucket.second <= second:
                completed += bucket.completed
                duration += bucket.duration_ms
        return completed, (duration / completed if completed else None)


class RoutingLoad:
    """In-memory load telemetry shared by the capabilities of one object.

    Pass one instance as `routing=` to several capabilities to observe them together;
    without one, each capability keeps its own.
    """

    def __init__(self) -> None:
        self._directions: dict[str, _DirectionLoad] = {
            "inbound": _DirectionLoad(),
            "outbound": _DirectionLoad(),
        }

    def begin(self, direction: Direction) -> Callable[[], None]:
        """Count one request in flight; the returned finisher (idempotent) completes it."""
        load = self._directions.get(direction) if isinstance(direction, str) else None
        if load is None:
            raise ValueError(f'direction must be "inbound" or "outbound", got {direction!r}')
        started_at = now_ms()
        load.in_flight += 1
        finished = False

        def finish() -> None:
            nonlocal finished
            if finished:
                return
            finished = True
            now = now_ms()
            load.in_flight -= 1
            load.record(now, max(0, now - started_at))

        return finish

    def snapshot(self, pending_deliveries: int = 0) -> LoadSnapshot:
        """The current load; `pending_deliveries` is the caller's durable backlog."""
        pending = check_non_negative_int("pending_deliveries", pending_deliveries)
        now = now_ms()
        inbound = self._directions["inbound"]
        outbound = self._directions["outbound"]
        in_completed, in_average = inbound.window(now)
        out_completed, out_average = outbound.window(now)
        return LoadSnapshot(
            observed_at=now,
            window_ms=WINDOW_MS,
            inbound=InboundLoad(inbound.in_flight, in_completed, in_average),
            outbound=OutboundLoad(outbound.in_flight, out_completed, out_average, pending),
        )
