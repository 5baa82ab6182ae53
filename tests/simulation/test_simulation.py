"""Every example under seeded faults, through the public simulation API.

Each example's scenario (its own module here) runs two fixed seeds in CI and replays the
same trace from its seed; each example's cycle (every handler once) survives a crash
before and after each of its commits in turn (exhaustive mode).
`pytest tests/simulation --durability-seeds=N` runs N seeds of each; a failure prints
the `--durability-seed=...` that replays it.
"""

from __future__ import annotations

from types import ModuleType

import pytest

from durability.testing import SimulationRun

from . import _counter, _renewals, _rpc, _topics, _topics_concurrent

pytestmark = pytest.mark.slow

SCENARIOS: dict[str, ModuleType] = {
    "counter": _counter,
    "subscription_renewals": _renewals,
    "event_topics": _topics,
    "event_topics_concurrent": _topics_concurrent,
    "rpc_transforms": _rpc,
}
STEPS = {"counter": 120, "subscription_renewals": 120, "event_topics": 150, "rpc_transforms": 120}
"""Steps of a seeded run (the concurrent topics run its default, 100)."""


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_example_survives_seeded_faults(name: str) -> None:
    """The example keeps its promises under two seeds' worth of faults."""
    simulation = SCENARIOS[name].simulation(steps=STEPS.get(name, 100))
    report = simulation.check(seeds=2)
    assert sum(report.faults.values()) > 0, report


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_seed_replays_exactly(name: str) -> None:
    """Two runs of one seed make the same requests and faults at the same virtual times."""
    traces: list[list[str]] = []
    module = SCENARIOS[name]

    async def traced(run: SimulationRun) -> None:
        await module.scenario(run)
        traces.append(run.trace.lines())

    simulation = module.simulation(steps=40, scenario=traced)
    simulation.replay(3)
    simulation.replay(3)
    assert traces[0] == traces[1]


CYCLES = ("counter", "subscription_renewals", "event_topics", "rpc_transforms")


@pytest.mark.parametrize("name", CYCLES)
def test_every_commit_of_each_handler_can_crash(name: str) -> None:
    """Exhaustive mode: the example's cycle (each of its handlers once) survives a crash
    before, then one after, each of its commits in turn."""
    module = SCENARIOS[name]
    report = module.simulation(scenario=module.cycle).exhaust()
    commits = report.faults["commit crash"]
    assert commits > 0 and report.faults["commit crash_after"] == commits
    assert report.runs == 1 + 2 * commits
