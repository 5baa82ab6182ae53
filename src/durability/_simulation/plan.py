"""Which faults a simulation run injects, and where: rates, fault points, and replay tokens.

A run passes many fault points (each commit of a turn that wrote, each suspension of an
object's work, each outside call, each advance of the clock, each alarm queued, each
`set_alarm`, each cold-store call), numbered per kind from 1 in the order the run
reaches them. A random plan draws at each point from its own generator, seeded by the
run's seed, so the scenario's random choices do not depend on the faults. A forced plan
injects exactly the faults it lists, at their points: a shrunk failure, or one point of
an exhaustive sweep. A token names a run: `SEED` (the random plan) or
`SEED:STEPS:FAULTS` (a forced plan over that many steps), e.g. `7:12:c5=crash,o2=slow/900`.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

KINDS = {
    "commit": "c",
    "await": "a",
    "outside": "o",
    "advance": "v",
    "alarm": "l",
    "set_alarm": "s",
    "cold": "k",
}
"""Fault point kinds and their letters in tokens."""
_KIND_OF = {letter: kind for kind, letter in KINDS.items()}
_FAULT = re.compile(r"([a-z])(\d+)=([a-z_]+)((?:/\d+)*)")


class TokenError(ValueError):
    """A replay token that does not parse."""


@dataclass(frozen=True, slots=True)
class FaultRates:
    """How often each fault is injected where it can be: a probability per fault point
    (0 turns that fault off). The defaults inject a few faults into every hundred calls.

    Per commit of a turn that wrote: `crash_before_commit` (its writes lost),
    `crash_after_commit` (durable, replies lost), `fail_commit` (a storage error). Per
    suspension of an object's call or handler (an `await` that waits): `crash_at_await`.
    Per call to an outside service (a binding that is not an object class):
    `slow_outside` (waits up to `max_outside_delay_ms` of virtual time first),
    `fail_outside` (fails, before or after the service's effect), `crash_at_outside`
    (the calling object crashes just before or just after the service's effect). Per
    `advance`: `evict` (an object live then is evicted, or crashed, at a random moment
    of the span). Per alarm queued: `late_alarm` (delivered up to `max_alarm_delay_ms`
    late). Per `set_alarm`: `fail_set_alarm`. Per cold-store call: `fail_cold_store`.
    """

    crash_before_commit: float = 0.02
    crash_after_commit: float = 0.01
    fail_commit: float = 0.005
    crash_at_await: float = 0.01
    slow_outside: float = 0.05
    fail_outside: float = 0.02
    crash_at_outside: float = 0.02
    evict: float = 0.1
    late_alarm: float = 0.05
    fail_set_alarm: float = 0.005
    fail_cold_store: float = 0.02
    max_outside_delay_ms: int = 5_000
    max_alarm_delay_ms: int = 2_000

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if name.startswith("max_"):
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ValueError(f"{name} must be a positive integer, got {value!r}")
            elif isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must be a probability (a float), got {value!r}")
            elif not 0 <= value <= 1:
                raise ValueError(f"{name} must be between 0 and 1, got {value!r}")


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault injected at the `number`-th point of its `kind`; `params` say how
    (a delay, a moment and a target, ...)."""

    kind: str
    number: int
    action: str
    params: tuple[int, ...] = ()

    def token(self) -> str:
        return f"{KINDS[self.kind]}{self.number}={self.action}" + "".join(
            f"/{param}" for param in self.params
        )

    @classmethod
    def parse(cls, text: str) -> Fault:
        match = _FAULT.fullmatch(text)
        if match is None or match[1] not in _KIND_OF:
            raise TokenError(f"not a fault: {text!r} (expected e.g. c5=crash or o2=slow/900)")
        params = tuple(int(part) for part in match[4].split("/")[1:])
        return cls(_KIND_OF[match[1]], int(match[2]), match[3], params)


@dataclass(frozen=True, slots=True)
class Token:
    """What replays one run: its seed and, for a forced plan, its steps and faults."""

    seed: int
    steps: int | None = None
    faults: tuple[Fault, ...] | None = None

    def __str__(self) -> str:
        if self.faults is None:
            return str(self.seed)
        faults = ",".join(fault.token() for fault in self.faults)
        return f"{self.seed}:{self.steps}:{faults}"

    @classmethod
    def parse(cls, text: str) -> Token:
        parts = text.strip().split(":")
        try:
            if len(parts) == 1:
                return cls(int(parts[0]))
            if len(parts) == 3:
                faults = tuple(Fault.parse(item) for item in parts[2].split(",") if item)
                return cls(int(parts[0]), int(parts[1]), faults)
        except ValueError as error:
            if isinstance(error, TokenError):
                raise
        raise TokenError(
            f"durability seed {text!r} must be SEED or SEED:STEPS:FAULTS (as a failure prints it)"
        )


Chooser = Callable[[random.Random, int], Fault | None]
"""Draws whether the `number`-th point of a kind gets a fault (a random plan)."""


class Plan:
    """The faults of one run: drawn at random from the seed, or forced by a token.

    Every point is counted, armed or not, so points keep their numbers across runs of
    the same seed; a disarmed plan injects nothing.
    """

    def __init__(self, seed: int, forced: tuple[Fault, ...] | None = None) -> None:
        self._rng = random.Random(f"durability-faults:{seed}")
        self._forced = None if forced is None else {(f.kind, f.number): f for f in forced}
        self.counts: Counter[str] = Counter()
        self.armed_counts: Counter[str] = Counter()
        """The points passed while armed (those an exhaustive sweep may fault)."""
        self.injected: list[Fault] = []
        self.armed = True

    @property
    def forced(self) -> bool:
        """Whether the plan injects only listed faults."""
        return self._forced is not None

    def point(self, kind: str, choose: Chooser) -> Fault | None:
        """Count one point of `kind`; the fault injected there, if any."""
        self.counts[kind] += 1
        number = self.counts[kind]
        if not self.armed:
            return None
        self.armed_counts[kind] += 1
        if self._forced is not None:
            fault = self._forced.get((kind, number))
        else:
            fault = choose(self._rng, number)
        if fault is not None:
            self.injected.append(fault)
        return fault
