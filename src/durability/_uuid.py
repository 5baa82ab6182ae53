"""Random ids: generations, lease batch ids and log deduplication keys.

Every random id of the library draws its bytes from `random_bytes`: the operating
system's randomness, unless a deterministic simulation replaces the source for the
length of one run (`draw_from`), so that a seed replays the same ids. New operation
records take their generations from `fresh_generation`: a prefix drawn from that source
once, then a counter. Nothing is drawn at import: Cloudflare refuses randomness while a
Worker starts, so the prefix is drawn by the first generation.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable

_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}
"""A random hex digit turned into the RFC 4122 variant digit (its top two bits 10)."""


_source: Callable[[int], bytes] = os.urandom


def _new_prefix() -> str:
    return _source(12).hex() + "-"


_prefix: str | None = None
"""The prefix of fresh generations, drawn by the first one (`None` until then)."""
_counter = itertools.count(1)


def random_bytes(count: int) -> bytes:
    """`count` random bytes from the current source (`os.urandom` unless replaced)."""
    return _source(count)


def draw_from(source: Callable[[int], bytes] | None) -> None:
    """Draw random bytes from `source` from now on (`None`: `os.urandom` again); fresh
    generations start again from a prefix drawn from it."""
    global _source, _prefix, _counter
    _source = os.urandom if source is None else source
    _prefix = None
    _counter = itertools.count(1)


def random_uuid() -> str:
    """A random version-4 UUID in its canonical 36-character form.

    Formatted from the hex of the random bytes directly, the version and variant digits set
    in the text: `str(uuid.uuid4())` costs about twice as much.
    """
    text = _source(16).hex()
    return f"{text[:8]}-{text[8:12]}-4{text[13:16]}-{_VARIANT[text[16]]}{text[17:20]}-{text[20:]}"


def fresh_generation() -> str:
    """A new record generation: unique without a random draw each (a registration makes
    one per call). A prefix of 96 random bits drawn once per process (again in a forked
    child, and for each simulated run) keeps apart every process that ever writes an
    object; a counter keeps apart the generations of this one. Cheaper than
    `random_uuid` by the random draw and the formatting."""
    global _prefix
    if _prefix is None:
        _prefix = _new_prefix()
    return f"{_prefix}{next(_counter):x}"


def _forked() -> None:
    """In a forked child: a prefix of its own, so it never repeats its parent's ids."""
    global _prefix
    _prefix = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
