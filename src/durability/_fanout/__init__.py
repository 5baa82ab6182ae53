"""Fanout: durable, independent delivery of each message to static targets."""

from __future__ import annotations

from .fanout import DurabilityFanout
from .types import (
    FanoutInput,
    FanoutMessage,
    FanoutTarget,
    MessageWrite,
    StoredFailure,
    StoredMessage,
)

__all__ = [
    "DurabilityFanout",
    "FanoutInput",
    "FanoutMessage",
    "FanoutTarget",
    "MessageWrite",
    "StoredFailure",
    "StoredMessage",
]
