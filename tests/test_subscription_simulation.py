"""The subscription renewals example's simulation (examples/subscription_renewals/
simulation.py), as a user runs it: with a charge id that is not stable it fails at once
with a seed, a short trace and the command that replays it; as written, it passes.

`--durability-seeds=500` (or `DURABILITY_SEEDS=500`) runs the 500 seeds the docs speak of.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from durability.testing import SimulationFailure

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "subscription_renewals"
RIGHT_ID = 'f"period:{period_start}"'
WRONG_ID = 'f"period:{now_ms()}"'
"""The time the renewal runs instead of its slot: a retried renewal charges again."""


def _load_simulation() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "subscription_simulation", EXAMPLE / "simulation.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


example = _load_simulation()


@pytest.fixture
def wrong_charge_id(tmp_path: Path) -> Path:
    """A copy of the example whose renewal names its charge by the time it runs."""
    project = tmp_path / "subscription_renewals"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".durability"))
    entry = project / "src" / "entry.py"
    source = entry.read_text()
    assert source.count(RIGHT_ID) == 1
    entry.write_text(source.replace(RIGHT_ID, WRONG_ID))
    return project


def test_a_charge_id_that_changes_on_retry_fails_with_seed_and_trace(
    wrong_charge_id: Path,
) -> None:
    """One of the first seeds fails `charged_once`: a renewal crashed after registering its
    charge ran again and charged the same period under a new key; the failure is shrunk to
    a few steps and faults and prints the command that replays it, which fails again."""
    simulation = example.simulation(wrong_charge_id)
    with pytest.raises(SimulationFailure) as failed:
        simulation.check(seeds=10)
    failure = failed.value
    assert "charged_once" in str(failure) and "under more than one idempotency key" in str(failure)
    assert f"--durability-seed={failure.token}" in failure.command
    steps, faults = failure.token.split(":")[1:]
    assert int(steps) < example.STEPS and 1 <= len(faults.split(",")) <= 3
    assert any("crash SUBSCRIPTIONS:" in line for line in failure.trace)
    with pytest.raises(SimulationFailure):
        simulation.replay(failure.token)


def test_the_example_keeps_its_promises_under_faults() -> None:
    """As written (the charge named by its slot), the example passes its seeds: each
    period charged under one key, every charge made, nothing stranded."""
    report = example.simulation().check(seeds=20)
    assert report.runs >= 20
    assert report.faults["commit crash"] + report.faults["await crash"] > 0
    assert report.faults["advance evict"] + report.faults["advance crash"] > 0
