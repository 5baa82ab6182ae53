"""Lifecycle events of fanout deliveries (entity kind ``fanout_delivery``).

Every event names the delivery by message `id`, `target` and `generation` (the
registration). Like every lifecycle event they are best-effort telemetry, emitted
through the engine's emitter: they may be lost or repeated across crashes and never
change state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .._errors import SerializedError
from .lifecycle import LifecycleEventType


@dataclass(frozen=True, kw_only=True)
class _DeliveryEvent:
    """The fields every fanout delivery event carries, in their order."""

    type: str
    entity_kind: Literal["fanout_delivery"] = field(default="fanout_delivery", init=False)
    id: str
    target: str
    generation: str
    timestamp: int
    attempt: int


@dataclass(frozen=True, kw_only=True)
class DeliveryRegisteredEvent(_DeliveryEvent):
    """A new delivery obligation was stored (not for deduplicated enqueues)."""

    type: Literal["registered"] = field(default="registered", init=False)


@dataclass(frozen=True, kw_only=True)
class DeliveryStartedEvent(_DeliveryEvent):
    """A delivery was claimed and is about to be handed to its target."""

    type: Literal["attempt_started"] = field(default="attempt_started", init=False)


@dataclass(frozen=True, kw_only=True)
class DeliverySettledEvent(_DeliveryEvent):
    """An attempt's outcome was persisted: ``completed`` or ``retry_scheduled``."""

    type: Literal["attempt_settled"] = field(default="attempt_settled", init=False)
    outcome: Literal["completed", "retry_scheduled"]
    duration_ms: int
    error: SerializedError | None = None
    next_attempt_at: int | None = None


@dataclass(frozen=True, kw_only=True)
class DeliveryTerminalEvent(_DeliveryEvent):
    """A delivery left the queue without success: dead-lettered, or dropped without a DLQ."""

    type: Literal["terminal"] = field(default="terminal", init=False)
    reason: Literal["dead_lettered", "attempts_exhausted"]
    error: SerializedError


DELIVERY_EVENT_TYPES: frozenset[str] = frozenset(
    {
        LifecycleEventType.REGISTERED,
        LifecycleEventType.ATTEMPT_STARTED,
        LifecycleEventType.ATTEMPT_SETTLED,
        LifecycleEventType.TERMINAL,
    }
)
"""The event types of fanout deliveries (what a fanout's `lifecycle_events=` may name)."""
