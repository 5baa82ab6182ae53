"""A process killed with SIGKILL never loses a write whose stub call had returned."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from durability.runtime import Runtime

from ._kill import run_and_kill
from .child import OBJECTS, bindings

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("child.py")
RUNS = 5


async def test_acknowledged_writes_survive_sigkill(tmp_path: Path) -> None:
    """Several runs killed at random moments; every acknowledged write is found after."""
    await killed_runs_lose_nothing(tmp_path, [])


async def test_acknowledged_writes_survive_sigkill_while_files_close_and_reopen(
    tmp_path: Path,
) -> None:
    """With at most one object file open, idle objects' files are closed and reopened
    between writes; runs killed at random moments still lose no acknowledged write."""
    await killed_runs_lose_nothing(tmp_path, ["1"])


async def killed_runs_lose_nothing(tmp_path: Path, extra_args: list[str]) -> None:
    """Kill RUNS children at random moments, then find every acknowledged write."""
    seed = random.randrange(1_000_000)
    rng = random.Random(seed)
    data = tmp_path / "data"
    acknowledged: dict[int, set[str]] = {n: set() for n in range(OBJECTS)}
    for run in range(RUNS):
        args = [str(data), str(seed * 100 + run), *extra_args]
        lines = run_and_kill(CHILD, args, tmp_path / f"run{run}.out", rng, kill_after_s=(0.05, 0.4))
        for line in lines[1:]:
            target, write_id = line.split(" ")
            acknowledged[int(target)].add(write_id)
    assert sum(len(ids) for ids in acknowledged.values()) > RUNS, f"too few writes (seed {seed})"
    async with Runtime(path=str(data), bindings=bindings) as runtime:
        for number in range(OBJECTS):
            stored = set(await runtime.env.LEDGERS.get_by_name(f"ledger-{number}").ids())
            missing = acknowledged[number] - stored
            lost = f"ledger-{number} lost {len(missing)} acknowledged writes (seed {seed})"
            assert not missing, lost
