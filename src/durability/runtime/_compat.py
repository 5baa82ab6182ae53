"""The served project's compatibility date and flags, for the behaviours that follow them.

workerd changes some behaviours at a compatibility date, each with a flag that turns it
on earlier (and for some, one that keeps the old behaviour). `durability serve` serves
one project, so its settings are the process's: `load_project` records them, and code
that behaves by date asks `enabled`. Without a project (a worker module, or the runtime
alone) no date applies and every behaviour is the one before its date.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "AUTO_REPLY_TO_CLOSE",
    "STANDARD_BINARY_TYPE",
    "Behaviour",
    "Compatibility",
    "enabled",
    "set_compatibility",
]


@dataclass(frozen=True)
class Behaviour:
    """A behaviour workerd turns on at `since`, or earlier with `flag`; `off_flag` (when
    workerd has one) keeps the old behaviour after that date."""

    since: str
    flag: str
    off_flag: str | None = None


AUTO_REPLY_TO_CLOSE = Behaviour("2026-04-07", "web_socket_auto_reply_to_close")
"""A WebSocket end taken by `accept()` answers the peer's close frame itself (measured
on workerd: the flag has no off switch)."""

STANDARD_BINARY_TYPE = Behaviour(
    "2026-03-17", "websocket_standard_binary_type", "no_websocket_standard_binary_type"
)
"""A WebSocket end's `binaryType` starts as `"blob"`: `accept()` listeners get binary
messages as a `Blob`."""


@dataclass(frozen=True)
class Compatibility:
    """A project's `compatibility_date` (`YYYY-MM-DD`, or `None`) and flags."""

    date: str | None = None
    flags: frozenset[str] = frozenset()

    def enabled(self, behaviour: Behaviour) -> bool:
        """Whether `behaviour` is on for this date and these flags."""
        if behaviour.off_flag is not None and behaviour.off_flag in self.flags:
            return False
        if behaviour.flag in self.flags:
            return True
        return self.date is not None and self.date >= behaviour.since


_current = [Compatibility()]


def set_compatibility(date: object, flags: object) -> None:
    """Record the served project's `compatibility_date` and `compatibility_flags` (values
    of other types count as absent: the config's own checks name them)."""
    kept = (
        frozenset(flag for flag in flags if isinstance(flag, str))
        if isinstance(flags, list)
        else frozenset()
    )
    _current[0] = Compatibility(date if isinstance(date, str) else None, kept)


def enabled(behaviour: Behaviour) -> bool:
    """Whether `behaviour` is on for the served project."""
    return _current[0].enabled(behaviour)
