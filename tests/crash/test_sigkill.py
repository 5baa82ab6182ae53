"""A process killed with SIGKILL never loses a write whose stub call had returned."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from durability.runtime import Runtime

from .child import OBJECTS, bindings

CHILD = Path(__file__).with_name("child.py")
RUNS = 5
READY_TIMEOUT_S = 30.0


def _run_and_kill(path: Path, seed: int, out_file: Path, rng: random.Random) -> list[str]:
    """Start the child, SIGKILL it 50-400 ms after it is ready; the acknowledged lines."""
    with out_file.open("wb") as out:
        child = subprocess.Popen(
            [sys.executable, str(CHILD), str(path), str(seed)],
            stdout=out,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            deadline = time.monotonic() + READY_TIMEOUT_S
            while not out_file.read_bytes().startswith(b"ready\n"):
                assert child.poll() is None, f"child exited early with {child.returncode}"
                assert time.monotonic() < deadline, "child never became ready"
                time.sleep(0.01)
            time.sleep(rng.uniform(0.05, 0.4))
            child.send_signal(signal.SIGKILL)
        finally:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    text = out_file.read_text()
    complete = text[: text.rfind("\n") + 1]
    return complete.splitlines()[1:]


async def test_acknowledged_writes_survive_sigkill(tmp_path: Path) -> None:
    """Several runs killed at random moments; every acknowledged write is found after."""
    seed = random.randrange(1_000_000)
    rng = random.Random(seed)
    data = tmp_path / "data"
    acknowledged: dict[int, set[str]] = {n: set() for n in range(OBJECTS)}
    for run in range(RUNS):
        lines = _run_and_kill(data, seed * 100 + run, tmp_path / f"run{run}.out", rng)
        for line in lines:
            target, write_id = line.split(" ")
            acknowledged[int(target)].add(write_id)
    assert sum(len(ids) for ids in acknowledged.values()) > RUNS, f"too few writes (seed {seed})"
    async with Runtime(path=str(data), bindings=bindings) as runtime:
        for number in range(OBJECTS):
            stored = set(await runtime.env.LEDGERS.get_by_name(f"ledger-{number}").ids())
            missing = acknowledged[number] - stored
            lost = f"ledger-{number} lost {len(missing)} acknowledged writes (seed {seed})"
            assert not missing, lost
