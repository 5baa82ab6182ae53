"""`Simulation`: a worker, a scenario and invariants, run for many seeds under faults."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping, Sequence

from .._validate import check_positive_int
from .invariants import Invariant
from .outcome import Outcome, SimulationFailure, SimulationReport
from .plan import KINDS, Fault, FaultRates, Token
from .runner import Bindings, Scenario, Setup, run_once
from .session import replay_command, replay_token, seed_count
from .shrink import shrink

EXHAUSTIVE_ACTIONS: Mapping[str, tuple[str, ...]] = {
    "commit": ("crash", "crash_after"),
    "await": ("crash",),
    "outside": ("fail_before", "fail_after", "crash_before", "crash_after"),
    "set_alarm": ("fail",),
    "cold": ("fail",),
}
"""What `exhaust` injects at each point of a kind, one run per point and action."""


class Simulation:
    """A deterministic simulation of a worker's objects under faults (docs/testing.md).

    `worker` is what `durability serve` takes (a project folder with a wrangler config,
    a worker module's file or dotted name), or a mapping of bindings; it is loaded anew
    for every run. `scenario(run)` drives it through `run.call` / `run.request` and
    `run.advance`, drawing every choice from `run.rng`, for `run.steps()` steps (`steps`
    of them). `bindings(run)`, if given, returns bindings to add or replace for a run
    (fakes of outside services, built fresh per run). Every binding that is an outside
    service (an instance of a class of yours, or those named in `outside`) is reached
    through the simulation, which may slow its calls, fail them, or crash the calling
    object around their effect. After the scenario, faults stop and the clock moves
    `settle_ms` (retries finish), then each of `invariants` checks the run.

    `files=True` keeps the objects in SQLite files (a temporary folder per run) instead
    of in memory; `max_call_ms` is how long a call may wait on virtual time before the
    run fails as hung. `rates` says how often each fault is injected.
    """

    def __init__(
        self,
        worker: str | os.PathLike[str] | Mapping[str, object],
        scenario: Scenario,
        *,
        invariants: Sequence[Invariant] = (),
        bindings: Bindings | None = None,
        rates: FaultRates | None = None,
        steps: int = 100,
        settle_ms: int = 900_000,
        max_call_ms: int = 3_600_000,
        files: bool = False,
        outside: Collection[str] | None = None,
    ) -> None:
        if not isinstance(worker, (str, os.PathLike, Mapping)):
            raise TypeError(
                "worker must be a project folder, a worker module (path or dotted name) or "
                f"a mapping of bindings, got {type(worker).__name__}"
            )
        if not callable(scenario):
            raise TypeError(f"scenario must be an async function, got {type(scenario).__name__}")
        if bindings is not None and not callable(bindings):
            raise TypeError("bindings must be a function of the run returning a mapping")
        for invariant in invariants:
            if not callable(invariant):
                raise TypeError(f"invariants must be callables, got {invariant!r}")
        if rates is not None and not isinstance(rates, FaultRates):
            raise TypeError(f"rates must be a FaultRates, got {type(rates).__name__}")
        self._setup = Setup(
            worker=worker,
            scenario=scenario,
            invariants=tuple(invariants),
            bindings=bindings,
            rates=rates if rates is not None else FaultRates(),
            steps=check_positive_int("steps", steps),
            settle_ms=check_positive_int("settle_ms", settle_ms),
            max_call_ms=check_positive_int("max_call_ms", max_call_ms),
            files=bool(files),
            outside=None if outside is None else frozenset(outside),
        )

    def check(self, seeds: int | Iterable[int] = 20) -> SimulationReport:
        """Run the scenario once per seed (`seeds` many from 0, or those given); the
        first failing run is shrunk and raised as `SimulationFailure`.

        Under pytest, `--durability-seed=TOKEN` runs only that run (as a failure prints
        it) and `--durability-seeds=N` runs seeds 0 to N-1 instead (outside pytest: the
        `DURABILITY_SEED` and `DURABILITY_SEEDS` environment variables).
        """
        __tracebackhide__ = True  # pytest shows the failure, not the simulator's frames
        report = SimulationReport()
        replay = replay_token()
        if replay is not None:
            outcome = self._run(Token.parse(replay))
            if outcome.error is not None:
                raise self._failure(outcome, None)
            report.add(outcome)
            return report
        count = seed_count()
        chosen: Iterable[int] = range(count) if count is not None else _seeds(seeds)
        for seed in chosen:
            outcome = self._run(Token(seed))
            if outcome.error is not None:
                shrunk = shrink(self._run, outcome)
                raise self._failure(shrunk, outcome)
            report.add(outcome)
        return report

    def exhaust(self, seed: int = 0, points: Collection[str] = ("commit",)) -> SimulationReport:
        """Crash (or fail) at every point of `points` in turn, one run each: first a run
        of `seed` with no faults counts the points (up to `run.disarm()` or the end of the
        scenario, not the quiet period after it), then each point gets each action of
        its kind (`"commit"`: a crash before the commit and one after it; `"await"`: a
        crash; `"outside"`: a failure and a crash, before and after the effect;
        `"set_alarm"`, `"cold"`: a failure), the run otherwise without faults. The first
        failing run is raised as `SimulationFailure` (its steps shrunk).
        """
        __tracebackhide__ = True
        unknown = sorted(set(points) - set(EXHAUSTIVE_ACTIONS))
        if unknown or isinstance(points, str):
            raise ValueError(
                f"points must name kinds among {sorted(EXHAUSTIVE_ACTIONS)}, got {points!r}"
            )
        steps = self._setup.steps
        pristine = self._run(Token(seed, steps, ()))
        if pristine.error is not None:
            raise self._failure(shrink(self._run, pristine), pristine)
        report = SimulationReport()
        report.add(pristine)
        for kind in sorted(points, key=list(KINDS).index):
            for number in range(1, pristine.armed[kind] + 1):
                for action in EXHAUSTIVE_ACTIONS[kind]:
                    token = Token(seed, steps, (Fault(kind, number, action),))
                    outcome = self._run(token)
                    if outcome.error is not None:
                        raise self._failure(shrink(self._run, outcome), outcome)
                    report.add(outcome)
        return report

    def replay(self, token: str | int) -> SimulationReport:
        """Run exactly the run `token` names (a seed, or a token a failure printed)."""
        __tracebackhide__ = True
        outcome = self._run(Token.parse(str(token)))
        if outcome.error is not None:
            raise self._failure(outcome, None)
        report = SimulationReport()
        report.add(outcome)
        return report

    def _run(self, token: Token) -> Outcome:
        return run_once(self._setup, token)

    @staticmethod
    def _failure(outcome: Outcome, original: Outcome | None) -> SimulationFailure:
        token = str(outcome.forced()) if original is not None else str(outcome.token)
        shrunk_from = original if original is not None and original is not outcome else None
        failure = SimulationFailure(outcome, token, replay_command(token), shrunk_from)
        failure.__cause__ = outcome.error
        return failure


def _seeds(seeds: int | Iterable[int]) -> Iterable[int]:
    if isinstance(seeds, bool):
        raise TypeError("seeds must be a count or an iterable of seeds, got bool")
    if isinstance(seeds, int):
        return range(check_positive_int("seeds", seeds))
    return seeds
