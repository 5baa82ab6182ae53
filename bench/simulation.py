"""The time of one simulation run of the subscription renewals example.

    python bench/simulation.py [--runs 50] [--rounds 3]

Each run is what `Simulation.check` does for one seed: the project loaded anew, a fresh
event loop and virtual clock, an in-memory runtime with the simulation's faults, 100
steps of examples/subscription_renewals/simulation.py (subscriptions, cancellations and
reads over HTTP, days of renewals, crashes at commits and awaits, evictions, late
alarms, slow and failing payments), the quiet period, then the three invariants. The
goal: at most 50 ms per run, so 500 seeds fit in a test run.

Seeds 0 .. runs-1 run in each round; a table gives, per round, the wall time and the
process CPU time per run (median and best), then the faults and fault points of one
round. CPU time is the steadier figure on a shared machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import platform
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from types import ModuleType

GOAL_MS = 50.0
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "subscription_renewals"


def _example() -> ModuleType:
    """The example's simulation module (`simulation.py` beside its wrangler config)."""
    spec = importlib.util.spec_from_file_location("renewals_simulation", EXAMPLE / "simulation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def measure(runs: int) -> tuple[list[float], list[float], Counter[str], Counter[str]]:
    """Per-run wall and CPU seconds of seeds 0 .. runs-1, and the faults and points."""
    simulation = _example().simulation()
    walls: list[float] = []
    cpus: list[float] = []
    faults: Counter[str] = Counter()
    points: Counter[str] = Counter()
    for seed in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        report = simulation.check(seeds=[seed])
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        faults.update(report.faults)
        points.update(report.points)
    return walls, cpus, faults, points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50, help="seeds per round (default 50)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)  # the runs log every injected failure
    print(f"python {platform.python_version()}, {platform.machine()}, {args.runs} runs a round")
    print(f"{'round':>5}  {'wall med':>9}  {'wall min':>9}  {'cpu med':>8}  {'cpu min':>8}")
    medians: list[float] = []
    faults: Counter[str] = Counter()
    points: Counter[str] = Counter()
    for number in range(1, args.rounds + 1):
        walls, cpus, faults, points = measure(args.runs)
        medians.append(statistics.median(cpus) * 1000)
        print(
            f"{number:>5}  {statistics.median(walls) * 1000:>7.1f}ms  {min(walls) * 1000:>7.1f}ms"
            f"  {statistics.median(cpus) * 1000:>6.1f}ms  {min(cpus) * 1000:>6.1f}ms"
        )
    per_run = {kind: round(count / args.runs, 1) for kind, count in sorted(faults.items())}
    print(f"faults per run: {per_run}")
    print(f"fault points per run: { {k: round(v / args.runs) for k, v in sorted(points.items())} }")
    best = min(medians)
    verdict = "within" if best <= GOAL_MS else "over"
    print(f"best round: {best:.1f} ms of CPU per run, {verdict} the {GOAL_MS:.0f} ms goal")


if __name__ == "__main__":
    main()
