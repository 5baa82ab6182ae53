"""`Ledger`: what outside services did during a simulation run, for invariants to check."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Effect:
    """One effect an outside service applied or was asked again: its idempotency key,
    what it was for (`subject`), the virtual time, and whether the key was new then."""

    key: str
    subject: Hashable
    at_ms: int
    first: bool


class Ledger:
    """The effects of a run's fake services, in order (`run.ledger`).

    A fake records each request it gets with `record(key, subject)`, where `key` is the
    idempotency key it was given and `subject` what the effect is for (a customer and a
    billing period, an email and its recipient). `record` answers whether the key is new,
    so a fake can apply each key once, as a real provider deduplicating on it would.
    """

    def __init__(self, now_ms: Callable[[], int]) -> None:
        self._now_ms = now_ms
        self.effects: list[Effect] = []
        """Every request recorded, in order (repeats of a key included)."""
        self._keys: dict[str, Hashable] = {}

    def record(self, key: str, subject: Hashable = None) -> bool:
        """Record one request for `key` (about `subject`); True the first time `key` is seen."""
        if not isinstance(key, str):
            raise TypeError(f"key must be a string, got {type(key).__name__}")
        first = key not in self._keys
        if first:
            self._keys[key] = subject
        self.effects.append(Effect(key, subject, self._now_ms(), first))
        return first

    def keys(self) -> dict[str, Hashable]:
        """Each key recorded, with the subject it was first recorded for."""
        return dict(self._keys)

    def by_subject(self) -> dict[Hashable, list[str]]:
        """Each subject with the distinct keys it was recorded under, in order."""
        found: dict[Hashable, list[str]] = {}
        for key, subject in self._keys.items():
            found.setdefault(subject, []).append(key)
        return found

    def count(self, key: str) -> int:
        """How many times `key` was recorded (a repeat is a retry of the same effect)."""
        return sum(1 for effect in self.effects if effect.key == key)
