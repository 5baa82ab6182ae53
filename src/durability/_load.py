"""Local, advisory load telemetry and the result type of every durable enqueue.

`RoutingLoad` counts requests in flight and the completions of the last minute in
sixty one-second buckets per direction. It lives in memory only: eviction resets it,
which is fine because it steers routing decisions and never decides correctness.
Backlog (`pending_deliveries`) is always supplied by the caller from durable state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from ._clock import now_ms
from ._errors import SerializedError
from ._types import JsonValue
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

    def to_json(self) -> dict[str, JsonValue]:
        """The snapshot as JSON with the TypeScript library's camelCase keys, to return over RPC."""
        inbound, outbound = self.inbound, self.outbound
        return {
            "observedAt": self.observed_at,
            "windowMs": self.window_ms,
            "inbound": {
                "inFlight": inbound.in_flight,
                "completed": inbound.completed,
                "averageProcessingMs": inbound.average_processing_ms,
            },
            "outbound": {
                "inFlight": outbound.in_flight,
                "completed": outbound.completed,
                "averageProcessingMs": outbound.average_processing_ms,
                "pendingDeliveries": outbound.pending_deliveries,
            },
        }

    @classmethod
    def from_json(cls, value: object) -> LoadSnapshot:
        """A snapshot from `to_json()` output (camelCase or snake_case keys); `TypeError`
        names the field that is missing or of the wrong type."""
        data = _mapping("load", value)
        inbound = _mapping("load.inbound", _field(data, "load", "inbound"))
        outbound = _mapping("load.outbound", _field(data, "load", "outbound"))
        return cls(
            observed_at=_int(data, "load", "observed_at"),
            window_ms=_int(data, "load", "window_ms"),
            inbound=InboundLoad(
                _int(inbound, "load.inbound", "in_flight"),
                _int(inbound, "load.inbound", "completed"),
                _average(inbound, "load.inbound"),
            ),
            outbound=OutboundLoad(
                _int(outbound, "load.outbound", "in_flight"),
                _int(outbound, "load.outbound", "completed"),
                _average(outbound, "load.outbound"),
                _int(outbound, "load.outbound", "pending_deliveries"),
            ),
        )


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

    def to_json(self) -> dict[str, JsonValue]:
        """The result as JSON (`value` must be JSON), to return from an RPC method:
        stubs copy JSON values, not dataclasses."""
        error = self.error
        return {
            "success": self.success,
            "value": self.value,  # type: ignore[dict-item]
            "error": None if error is None else {"name": error.name, "message": error.message},
            "load": self.load.to_json(),
        }

    @classmethod
    def from_json(cls, value: object) -> EnqueueResult[Any]:
        """A result from `to_json()` output, e.g. what a stub returned."""
        data = _mapping("result", value)
        success = _field(data, "result", "success")
        if not isinstance(success, bool):
            raise TypeError("result.success must be a bool")
        error = data.get("error")
        serialized: SerializedError | None = None
        if error is not None:
            fields = _mapping("result.error", error)
            name, message = fields.get("name"), fields.get("message")
            if not isinstance(name, str) or not isinstance(message, str):
                raise TypeError("result.error must have string name and message")
            serialized = SerializedError(name, message)
        load = LoadSnapshot.from_json(_field(data, "result", "load"))
        return cls(success, data.get("value"), serialized, load)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _mapping(path: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{path} must be a mapping, got {type(value).__name__}")
    return value


def _field(data: Mapping[str, Any], path: str, name: str) -> Any:
    for key in (_camel(name), name):
        if key in data:
            return data[key]
    raise TypeError(f"{path}.{name} is missing")


def _int(data: Mapping[str, Any], path: str, name: str) -> int:
    value = _field(data, path, name)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{path}.{name} must be an integer, got {type(value).__name__}")
    return value


def _average(data: Mapping[str, Any], path: str) -> float | None:
    value = _field(data, path, "average_processing_ms")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{path}.average_processing_ms must be a number or None")
    return float(value)


class _Bucket:
    """Completions and their summed duration for one absolute second."""

    __slots__ = ("completed", "duration_ms", "second")

    def __init__(self) -> None:
        self.second = -1
        self.completed = 0
        self.duration_ms = 0


class _DirectionLoad:
    """In-flight count and one minute of one-second buckets for one direction.

    The window's totals are kept for the current second and adjusted by each record
    in it, so a snapshot per call sums the buckets once a second, not every time.
    """

    __slots__ = ("buckets", "cached", "in_flight")

    def __init__(self) -> None:
        self.in_flight = 0
        self.buckets = [_Bucket() for _ in range(_BUCKETS)]
        self.cached: list[int] | None = None
        """`[second, completed, duration_ms]` of the window ending at that second."""

    def record(self, now: int, duration_ms: int) -> None:
        second = now // _BUCKET_MS
        bucket = self.buckets[second % _BUCKETS]
        if bucket.second != second:
            bucket.second = second
            bucket.completed = 0
            bucket.duration_ms = 0
        bucket.completed += 1
        bucket.duration_ms += duration_ms
        cached = self.cached
        if cached is not None:
            if cached[0] == second:
                cached[1] += 1
                cached[2] += duration_ms
            else:
                self.cached = None

    def window(self, now: int) -> tuple[int, float | None]:
        second = now // _BUCKET_MS
        cached = self.cached
        if cached is None or cached[0] != second:
            completed = 0
            duration = 0
            for bucket in self.buckets:
                if second - _BUCKETS < bucket.second <= second:
                    completed += bucket.completed
                    duration += bucket.duration_ms
            cached = self.cached = [second, completed, duration]
        completed, duration = cached[1], cached[2]
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
