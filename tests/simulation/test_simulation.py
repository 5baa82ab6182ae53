"""Every example under seeded evictions and crashes on the virtual clock; seeds replay.

Each scenario runs two fixed seeds in CI. `DURABILITY_SIM_SEEDS=S1,S2,...` runs
exactly those seeds instead: to replay a failure (its message names its seed and the
command), or to explore many more.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from . import _counter, _renewals, _rpc, _topics
from ._sim import Simulation

Scenario = Callable[[Simulation, Path], Awaitable[None]]

SCENARIOS: dict[str, tuple[Scenario, float]] = {
    "counter": (_counter.run, 0.1),
    "subscription_renewals": (_renewals.run, 0.1),
    "event_topics": (_topics.run, 0.1),
    "rpc_transforms": (_rpc.run, 0.1),
}
"""Example name -> its scenario and the chance of a crash just after each method."""

FIXED_SEEDS = (1, 2)
SEEDS_VARIABLE = "DURABILITY_SIM_SEEDS"


def _seeds() -> list[int]:
    chosen = os.environ.get(SEEDS_VARIABLE, "")
    return [int(seed) for seed in chosen.split(",") if seed] or list(FIXED_SEEDS)


async def simulate(name: str, seed: int, data: Path) -> Simulation:
    """Run scenario `name` with `seed`; a failure names the seed and how to replay it."""
    scenario, crash_after_effect = SCENARIOS[name]
    sim = Simulation(seed, crash_after_effect=crash_after_effect)
    try:
        await scenario(sim, data)
    except Exception as error:
        replay = f"{SEEDS_VARIABLE}={seed} pytest tests/simulation -k {name}"
        raise AssertionError(
            f"simulation {name} failed with seed {seed} (replay: {replay}): {error!r}\n"
            + "\n".join(sim.trace[-20:])
        ) from error
    finally:
        await sim.close()
    return sim


@pytest.mark.parametrize("seed", _seeds())
@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_example_survives_seeded_faults(name: str, seed: int, tmp_path: Path) -> None:
    """The example keeps its promises under seeded evictions and crashes."""
    sim = await simulate(name, seed, tmp_path)
    assert sum(sim.faults.values()) > 0, sim.summary()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_a_seed_replays_exactly(name: str, tmp_path: Path) -> None:
    """Two runs of one seed make the same requests and faults at the same virtual times."""
    first = await simulate(name, FIXED_SEEDS[0], tmp_path / "first")
    second = await simulate(name, FIXED_SEEDS[0], tmp_path / "second")
    assert first.trace == second.trace
