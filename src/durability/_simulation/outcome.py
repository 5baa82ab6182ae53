"""How simulation runs end: one run's outcome, a failure to report, a passing report."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .plan import Fault, Token

TRACE_LINES = 60
"""At most this many trace lines in a failure's message (the last ones)."""


@dataclass
class Outcome:
    """One run: its token, the faults it injected, the points it passed (all of them, and
    those passed while faults were on), and its failure
    (`where` it failed: "scenario", an invariant's name, or "close")."""

    token: Token
    steps: int
    faults: list[Fault]
    points: Counter[str]
    armed: Counter[str]
    trace: list[str]
    error: BaseException | None = None
    where: str = ""
    step: int = 0

    @property
    def signature(self) -> tuple[str, str]:
        """What failed, to tell the same failure from another while shrinking."""
        return self.where, type(self.error).__name__

    def forced(self) -> Token:
        """The token that replays this run exactly: its steps and its faults, forced."""
        return Token(self.token.seed, self.steps, tuple(self.faults))


class SimulationFailure(AssertionError):
    """A simulation run failed: the message gives the seed, the error, the exact command
    that replays the (shrunk) run, and its trace.

    `seed` is the seed that failed, `token` what replays the shrunk run (the value of
    `--durability-seed`), `command` the whole command, `trace` the run's events, and
    `error` the exception the scenario or an invariant raised (also `__cause__`).
    """

    def __init__(
        self, outcome: Outcome, token: str, command: str, shrunk_from: Outcome | None
    ) -> None:
        self.seed = outcome.token.seed
        self.token = token
        self.command = command
        self.trace = outcome.trace
        self.error = outcome.error
        where = "the scenario" if outcome.where == "scenario" else outcome.where
        lines = [f"simulation failed with seed {self.seed} in {where}: {outcome.error!r}"]
        if shrunk_from is not None:
            lines.append(
                f"shrunk from {_count(shrunk_from.steps, 'step')} and "
                f"{_count(len(shrunk_from.faults), 'fault')} to {_count(outcome.steps, 'step')} "
                f"and {_count(len(outcome.faults), 'fault')} "
                f"({', '.join(f.token() for f in outcome.faults) or 'none'})"
            )
        lines.append(f"replay: {command}")
        shown = self.trace[-TRACE_LINES:]
        cut = len(self.trace) - len(shown)
        lines.append("trace:" + (f" (the last {len(shown)} of {len(self.trace)})" if cut else ""))
        lines.extend(f"  {line}" for line in shown)
        super().__init__("\n".join(lines))


@dataclass
class SimulationReport:
    """What passing runs did: how many, with which seeds, and the faults they injected
    (by kind and action, e.g. `"commit crash"`) and the fault points they passed while
    faults were on (by kind, e.g. `"commit"`)."""

    runs: int = 0
    seeds: list[int] = field(default_factory=list)
    faults: Counter[str] = field(default_factory=Counter)
    points: Counter[str] = field(default_factory=Counter)

    def add(self, outcome: Outcome) -> None:
        self.runs += 1
        if outcome.token.seed not in self.seeds:
            self.seeds.append(outcome.token.seed)
        self.faults.update(f"{fault.kind} {fault.action}" for fault in outcome.faults)
        self.points.update(outcome.armed)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
