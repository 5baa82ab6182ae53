"""Row shapes of the fanout tables as the store reads and writes them, and their random ids."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from json.encoder import encode_basestring
from typing import NamedTuple

from .._uuid import random_bytes


def json_pair(first: str, second: str) -> str:
    """`["first","second"]` as compact JSON text (the delivery identity; registration
    joins a delivery row's id the same way, in SQL).

    Built from the two quoted strings: the same text as encoding the list, without the
    encoder's per-call machinery.
    """
    return f"[{encode_basestring(first)},{encode_basestring(second)}]"


class NewMessage(NamedTuple):
    """A validated enqueue entry (a named tuple: one is built per message)."""

    key: str
    id: str
    payload: str


class Registered(NamedTuple):
    """An entry `register` stored, with the generation of its delivery rows."""

    entry: NewMessage
    generation: str


class Delivery(NamedTuple):
    """One delivery row joined with its manifest (`message_*` are `None` without one).

    A named tuple, built straight from the row SQLite returns: a pass builds one per
    due row, and a frozen dataclass of twenty fields costs ten times as much.
    """

    id: str
    message_key: str
    target: str
    phase: str
    attempt: int
    last_error: str | None
    last_error_name: str | None
    generation: str
    dead_lettered_at: int | None
    dead_letter_reason: str | None
    message_id: str | None
    payload: str | None
    enqueued_at: int | None
    message_generation: str | None
    claim_alone: int | None
    """`None` while no attempt is claimed; 0 for one claimed beside others, 1 alone."""
    interruptions: int
    """Attempts that never settled (the process stopped, the object was evicted)."""
    spared: int
    """Those of them claimed beside others: they do not count toward `max_attempts`."""

    @property
    def counted(self) -> int:
        """The attempts that count toward `max_attempts`."""
        return self.attempt - self.spared

    @property
    def delivery_id(self) -> str:
        """The identity a target and the DLQ see: `["<generation>","<target>"]`."""
        return json_pair(self.generation, self.target)

    def claimed(self, attempt: int, alone: int, spared: int, interruptions: int) -> Delivery:
        """This row as claimed for `attempt` (`alone` or not; `spared` and `interruptions`
        as the claim left them), built from slices: `_replace` is slow."""
        return from_sql((*self[:4], attempt, *self[5:14], alone, interruptions, spared))


from_sql: Callable[[Iterable[object]], Delivery] = Delivery._make
"""A `Delivery` of all its fields in order (a row of the store's row query), without the
keyword-aware constructor."""


def random_id() -> str:
    """A random (version 4) UUID string, without `uuid.UUID`'s per-call checks."""
    raw = bytearray(random_bytes(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
