"""Lifecycle events of records, the hook emitter, and structured failure reports (the
fanout's delivery events are in `delivery_events`).

Lifecycle events are best-effort telemetry, not a journal: they may be duplicated or
lost across crashes, and a hook that raises is logged and never changes state.
Failure reports are single structured records on the ``"durability"`` logger whose
``event`` attribute is a stable name such as ``durability.alarm.failed``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, TypeAlias, TypeVar

from .._errors import SerializedError, serialize_error
from .._types import JsonValue

logger = logging.getLogger("durability")

EntityKind: TypeAlias = Literal["operation", "named_alarm"]
SettledOutcome: TypeAlias = Literal["completed", "retry_scheduled", "failed"]
Event = TypeVar("Event")


class LifecycleEventType(StrEnum):
    """The `type` of every lifecycle event, as named constants.

    Members are strings, so `event.type == LifecycleEventType.REGISTERED` and
    `match event.type: case LifecycleEventType.REGISTERED:` both work; the events
    themselves carry the plain string.
    """

    REGISTERED = "registered"
    SCHEDULED = "scheduled"
    ATTEMPT_STARTED = "attempt_started"
    ATTEMPT_SETTLED = "attempt_settled"
    TERMINAL = "terminal"
    CANCELLED = "cancelled"
    RETRIED = "retried"
    PURGED = "purged"


EVERY_EVENT_TYPE: frozenset[str] = frozenset(LifecycleEventType)
"""Every lifecycle event type."""
SHARED_EVENT_TYPES: frozenset[str] = frozenset(
    {
        LifecycleEventType.ATTEMPT_STARTED,
        LifecycleEventType.ATTEMPT_SETTLED,
        LifecycleEventType.TERMINAL,
        LifecycleEventType.CANCELLED,
        LifecycleEventType.PURGED,
    }
)
"""The event types both operations and named alarms emit."""


def listened_types(
    hook: LifecycleHook | None, types: object, emitted: frozenset[str]
) -> frozenset[str]:
    """The event types to build: those `types` names (every type of `emitted`, what the
    helper can emit, when it is `None`), and none without a hook.

    `TypeError` unless `types` is `None` or an iterable of strings; `ValueError` for a
    type the helper never emits, or for `types` given without a hook to receive them.
    """
    if types is None:
        return emitted if hook is not None else frozenset()
    if isinstance(types, (str, bytes)) or not isinstance(types, Iterable):
        raise TypeError(
            "lifecycle_events must be an iterable of event type names (e.g. "
            f'["attempt_settled"]) or None, got {type(types).__name__}'
        )
    listened: set[str] = set()
    for name in types:
        if not isinstance(name, str):
            raise TypeError(
                f"lifecycle_events must hold event type names (str), got {type(name).__name__}"
            )
        listened.add(name)
    unknown = sorted(listened - emitted)
    if unknown:
        raise ValueError(
            f"lifecycle_events: {', '.join(map(repr, unknown))} is not an event type this "
            f"helper emits; choose from {', '.join(sorted(emitted))}"
        )
    if hook is None:
        raise ValueError("lifecycle_events needs on_lifecycle_event (the hook that receives them)")
    return frozenset(listened)


def report_failure(event: str, details: Mapping[str, Any], error: object) -> None:
    """Log one structured error record for `event`; never raises."""
    try:
        serialized = serialize_error(error)
        exc_info = error if isinstance(error, BaseException) else None
        logger.error(
            "%s %s: %s: %s",
            event,
            dict(details),
            serialized.name,
            serialized.message,
            exc_info=exc_info,
            extra={
                "event": event,
                "details": dict(details),
                "error": {"name": serialized.name, "message": serialized.message},
            },
        )
    except Exception:  # a broken log handler must not break the engine
        return


@dataclass(frozen=True, kw_only=True)
class _GenerationEvent:
    """The fields of an event about an operation record's new generation, in order."""

    type: str
    entity_kind: Literal["operation"] = field(default="operation", init=False)
    operation: str
    id: str
    generation: str
    timestamp: int
    attempt: int = 0


@dataclass(frozen=True, kw_only=True)
class RegisteredEvent(_GenerationEvent):
    """A new operation record was inserted (not emitted for duplicate registrations)."""

    type: Literal["registered"] = field(default=LifecycleEventType.REGISTERED.value, init=False)


@dataclass(frozen=True, kw_only=True)
class ScheduledEvent:
    """A named alarm occurrence was scheduled (every call, replacements included).

    A recurrence emits one for each slot it moves to; `occurrence` is that slot's
    number (`None` for a one-shot).
    """

    type: Literal["scheduled"] = field(default=LifecycleEventType.SCHEDULED.value, init=False)
    entity_kind: Literal["named_alarm"] = field(default="named_alarm", init=False)
    alarm: str
    id: str
    generation: str
    timestamp: int
    scheduled_time: int
    attempt: int = 0
    occurrence: int | None = None


@dataclass(frozen=True, kw_only=True)
class _AttemptEvent:
    """The fields every event about one attempt of a record carries, in their order."""

    type: str
    entity_kind: EntityKind
    operation: str | None = None
    alarm: str | None = None
    id: str
    generation: str
    timestamp: int
    attempt: int


@dataclass(frozen=True, kw_only=True)
class AttemptStartedEvent(_AttemptEvent):
    """An attempt was claimed and its handler is about to run.

    `operation` is set for operations and `alarm` for named alarms.
    """

    type: Literal["attempt_started"] = field(
        default=LifecycleEventType.ATTEMPT_STARTED.value, init=False
    )


@dataclass(frozen=True, kw_only=True)
class AttemptSettledEvent(_AttemptEvent):
    """An attempt's outcome was persisted.

    `error` is set unless the outcome is ``completed``; `next_attempt_at` only for
    ``retry_scheduled``; `result` only for ``completed`` when results are opted in.
    """

    type: Literal["attempt_settled"] = field(
        default=LifecycleEventType.ATTEMPT_SETTLED.value, init=False
    )
    outcome: SettledOutcome
    duration_ms: int
    error: SerializedError | None = None
    next_attempt_at: int | None = None
    result: JsonValue = None


@dataclass(frozen=True, kw_only=True)
class TerminalEvent(_AttemptEvent):
    """A record at its attempt limit was failed without calling its handler."""

    type: Literal["terminal"] = field(default=LifecycleEventType.TERMINAL.value, init=False)
    reason: Literal["attempts_exhausted"] = "attempts_exhausted"
    error: SerializedError


@dataclass(frozen=True, kw_only=True)
class CancelledEvent(_AttemptEvent):
    """A pending record was cancelled; `attempt` is how many attempts it had started.

    `running` tells whether an attempt was running in this instance (its signal was
    aborted, and whatever it returns is not recorded).
    """

    type: Literal["cancelled"] = field(default=LifecycleEventType.CANCELLED.value, init=False)
    running: bool


@dataclass(frozen=True, kw_only=True)
class RetriedEvent(_GenerationEvent):
    """A failed or cancelled operation was made pending again, as a new generation."""

    type: Literal["retried"] = field(default=LifecycleEventType.RETRIED.value, init=False)


@dataclass(frozen=True, kw_only=True)
class PurgedEvent:
    """`purge_before(before)` deleted `count` records (emitted even when `count` is 0)."""

    type: Literal["purged"] = field(default=LifecycleEventType.PURGED.value, init=False)
    entity_kind: EntityKind
    timestamp: int
    before: int
    count: int


LifecycleEvent: TypeAlias = (
    RegisteredEvent
    | ScheduledEvent
    | AttemptStartedEvent
    | AttemptSettledEvent
    | TerminalEvent
    | CancelledEvent
    | RetriedEvent
    | PurgedEvent
)
"""Every lifecycle event of operations and named alarms."""

LifecycleHook: TypeAlias = Callable[[LifecycleEvent], object]
"""`on_lifecycle_event(event)`: sync or async; its result and failures never matter."""

Emit: TypeAlias = Callable[[Any], None]


def create_emitter(
    hook: LifecycleHook | None,
    wait_until: Callable[[Awaitable[Any]], None],
) -> Emit:
    """Wrap `hook` so that calling it never raises and an async hook runs in the background.

    Callers skip building events when there is no hook; with one, the failure details
    are built only when the hook fails.
    """
    if hook is None:
        return _ignore

    def emit(event: Any) -> None:
        try:
            outcome = hook(event)
        except Exception as error:
            report_failure("durability.lifecycle_hook.failed", _hook_details(event), error)
            return
        if outcome is not None and inspect.isawaitable(outcome):
            wait_until(_reported(outcome, event))

    return emit


def _ignore(event: Any) -> None:
    """The emitter used when there is no hook."""


async def _reported(outcome: Awaitable[Any], event: Any) -> None:
    try:
        await outcome
    except asyncio.CancelledError:
        raise
    except Exception as error:
        report_failure("durability.lifecycle_hook.failed", _hook_details(event), error)


def _hook_details(event: Any) -> dict[str, Any]:
    return {
        "entity_kind": getattr(event, "entity_kind", None),
        "lifecycle_type": getattr(event, "type", None),
        "entity_id": getattr(event, "id", None) or "durability",
    }
