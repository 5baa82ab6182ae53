"""Random ids: generations, lease batch ids and log deduplication keys; and the fresh
generations of new operation records."""

from __future__ import annotations

import itertools
import os

_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}
"""A random hex digit turned into the RFC 4122 variant digit (its top two bits 10)."""


def random_uuid() -> str:
    """A random version-4 UUID in its canonical 36-character form.

    Formatted from the hex of `os.urandom` directly, the version and variant digits set
    in the text: `str(uuid.uuid4())` costs about twice as much.
    """
    text = os.urandom(16).hex()
    return f"{text[:8]}-{text[8:12]}-4{text[13:16]}-{_VARIANT[text[16]]}{text[17:20]}-{text[20:]}"


def _new_prefix() -> str:
    return os.urandom(12).hex() + "-"


_prefix = _new_prefix()
_counter = itertools.count(1)


def fresh_generation() -> str:
    """A new record generation: unique without a random draw each (a registration makes
    one per call). A prefix of 96 random bits drawn once per process (and again in a
    forked child) keeps apart every process that ever writes an object; a counter keeps
    apart the generations of this one. Cheaper than `random_uuid` by the `os.urandom`
    call and the formatting."""
    return f"{_prefix}{next(_counter):x}"


def _forked() -> None:
    """In a forked child: a prefix of its own, so it never repeats its parent's ids."""
    global _prefix
    _prefix = _new_prefix()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
