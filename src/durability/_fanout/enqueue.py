"""Validating an enqueue before anything is written, and when first attempts are due."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._errors import FanoutEnqueueError
from .._serialization import serialize
from .._validate import check_utf8
from .rows import NewMessage, random_id
from .types import FanoutInput

TARGETS_RULE = "Enqueue targets must be distinct configured target IDs"
IDS_RULE = "Message IDs and deduplication keys must be non-empty strings"


def first_attempt_at(created_at: int, batch_delay_ms: int) -> int:
    """When a message's first deliveries are due: at once, or at the next window boundary.

    Rounding up to a multiple of `batch_delay_ms` makes every message of one window
    due together, so they share a batch.
    """
    if batch_delay_ms == 0:
        return created_at
    return math.ceil(created_at / batch_delay_ms) * batch_delay_ms


@dataclass(frozen=True, slots=True)
class EnqueueRequest:
    """A checked enqueue: its entries, its sorted targets, and the ids to return."""

    entries: list[NewMessage]
    targets: list[str]
    ids: list[str]

    @classmethod
    def build(
        cls, messages: object, targets: object, configured: Mapping[str, Any]
    ) -> EnqueueRequest:
        """Check the input; raises (`FanoutEnqueueError` or `TypeError`) on a rejection."""
        chosen = cls._targets(targets, configured)
        batch = [messages] if isinstance(messages, FanoutInput) else messages
        if not isinstance(batch, (list, tuple)):
            raise TypeError(
                f"messages must be a FanoutInput or a list of them, got {type(messages).__name__}"
            )
        entries: list[NewMessage] = []
        for index, message in enumerate(batch):
            if not isinstance(message, FanoutInput):
                raise TypeError(
                    f"messages[{index}] must be a FanoutInput, got {type(message).__name__}"
                )
            message_id = random_id() if message.id is None else message.id
            key = message_id if message.deduplication_key is None else message.deduplication_key
            if (
                not isinstance(message_id, str)
                or not message_id
                or not isinstance(key, str)
                or not key
            ):
                raise FanoutEnqueueError(IDS_RULE)
            check_utf8(f"messages[{index}].id", message_id)
            check_utf8(f"messages[{index}].deduplication_key", key)
            entries.append(
                NewMessage(key, message_id, serialize(message.body, f"messages[{index}].body"))
            )
        return cls(entries, chosen, [entry.id for entry in entries])

    @staticmethod
    def _targets(targets: object, configured: Mapping[str, Any]) -> list[str]:
        if targets is None:
            return sorted(configured)
        if isinstance(targets, str) or not isinstance(targets, Sequence):
            raise FanoutEnqueueError(TARGETS_RULE)
        chosen = list(targets)
        if (
            not chosen
            or len(set(chosen)) != len(chosen)
            or any(not isinstance(t, str) or t not in configured for t in chosen)
        ):
            raise FanoutEnqueueError(TARGETS_RULE)
        return sorted(chosen)
