"""Validating an enqueue before anything is written, and when first attempts are due."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

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


class EnqueueRequest(NamedTuple):
    """A checked enqueue: its entries, its sorted targets, and the ids to return."""

    entries: list[NewMessage]
    targets: tuple[str, ...]
    ids: list[str]

    @classmethod
    def build(
        cls,
        messages: object,
        targets: object,
        configured: Mapping[str, Any],
        every: tuple[str, ...],
    ) -> EnqueueRequest:
        """Check the input (`targets=None` chooses `every` configured target, sorted);
        raises (`FanoutEnqueueError` or `TypeError`) on a rejection."""
        chosen = every if targets is None else _targets(targets, configured)
        batch = [messages] if isinstance(messages, FanoutInput) else messages
        if not isinstance(batch, (list, tuple)):
            raise TypeError(
                f"messages must be a FanoutInput or a list of them, got {type(messages).__name__}"
            )
        entries: list[NewMessage] = []
        ids: list[str] = []
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
            if not (message_id.isascii() and key.isascii()):
                check_utf8(f"messages[{index}].id", message_id)
                check_utf8(f"messages[{index}].deduplication_key", key)
            entries.append(NewMessage(key, message_id, _payload(message.body, index)))
            ids.append(message_id)
        return cls(entries, chosen, ids)


def _payload(body: object, index: int) -> str:
    """The stored text of the body of message `index`; its error names the message, the
    name formatted only then (serializing again raises the same error)."""
    try:
        return serialize(body)
    except (TypeError, ValueError):
        pass
    return serialize(body, f"messages[{index}].body")


def _targets(targets: object, configured: Mapping[str, Any]) -> tuple[str, ...]:
    """The chosen targets, sorted; `FanoutEnqueueError` unless distinct configured ids."""
    if isinstance(targets, str) or not isinstance(targets, Sequence):
        raise FanoutEnqueueError(TARGETS_RULE)
    chosen = list(targets)
    if (
        not chosen
        or len(set(chosen)) != len(chosen)
        or any(not isinstance(t, str) or t not in configured for t in chosen)
    ):
        raise FanoutEnqueueError(TARGETS_RULE)
    return tuple(sorted(chosen))
