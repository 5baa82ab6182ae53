"""What happened in a simulation run, stamped with the virtual time since it started."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..runtime._ids import ObjectId

MAX_VALUE_CHARS = 80
"""A value shown in the trace is cut to this many characters."""


class Trace:
    """The run's steps, calls, replies and faults, in order."""

    def __init__(self, now_ms: Callable[[], int]) -> None:
        self._now_ms = now_ms
        self._start = now_ms()
        self.events: list[tuple[int, str]] = []

    def add(self, text: str) -> None:
        """Add `text` at the current virtual time."""
        self.events.append((self._now_ms() - self._start, text))

    def lines(self) -> list[str]:
        """The events as lines: `+SECONDS.mmm  text`."""
        return [f"{ms / 1000:>+13.3f}s  {text}" for ms, text in self.events]


def object_label(object_id: ObjectId | None) -> str:
    """`NAMESPACE:name` (or the id's first 12 hex digits when it has no name)."""
    if object_id is None:
        return "(no object)"
    name = object_id.name if object_id.name is not None else str(object_id)[:12]
    return f"{object_id.namespace}:{name}"


def shown(value: Any) -> str:
    """`value` for the trace: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 3] + "..."
