"""Workflows survive SIGKILL: every acknowledged instance completes, no recorded step
result is lost (its step never runs again), every step's effect happened, nothing is
stranded."""

from __future__ import annotations

import asyncio
import random
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from durability.runtime import Runtime

from ._kill import run_and_kill
from .workflow_child import STEPS, bindings, objects

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("workflow_child.py")
RUNS = 3
RECOVERY_TIMEOUT_S = 30.0


async def _recover(data: Path) -> tuple[dict[str, dict[str, Any]], list[list[Any]]]:
    """Run a fresh runtime until every stored instance has ended (or the deadline);
    every instance's status, and the ledger's deliveries."""
    async with Runtime(path=str(data), bindings=bindings) as runtime:
        stubs = objects(runtime.env)
        ledger = runtime.env.LEDGER.get_by_name("ledger")
        deadline = time.monotonic() + RECOVERY_TIMEOUT_S
        while True:
            states: dict[str, dict[str, Any]] = {}
            for stub in stubs:
                states |= await stub.states()
            ended = all(state["status"] in ("complete", "errored") for state in states.values())
            if ended or time.monotonic() > deadline:
                return states, await ledger.report()
            await asyncio.sleep(0.1)


async def test_workflow_instances_survive_sigkill(tmp_path: Path) -> None:
    """Killed mid-flight three times: every acknowledged instance completes with results
    its steps really produced, once recorded never produced again."""
    seed = random.randrange(1_000_000)
    rng = random.Random(seed)
    data = tmp_path / "data"
    acknowledged: set[str] = set()
    for run in range(RUNS):
        for line in run_and_kill(
            CHILD, [str(data), str(seed * 10 + run)], tmp_path / f"run{run}.out", rng
        ):
            words = line.split(" ")
            if words[0] == "wf":
                acknowledged.add(words[2])
    context = f"(seed {seed}, {len(acknowledged)} acknowledged)"
    assert len(acknowledged) > RUNS, f"too few instances started {context}"

    states, deliveries = await _recover(data)

    missing = sorted(acknowledged - states.keys())
    assert not missing, f"acknowledged instances lost: {missing[:5]} {context}"
    stranded = sorted((i, s["status"]) for i, s in states.items() if s["status"] != "complete")
    assert not stranded, f"instances not complete: {stranded[:5]} {context}"
    delivered: dict[tuple[str, str], list[int]] = defaultdict(list)
    for instance, step, attempt in deliveries:
        delivered[(instance, step)].append(attempt)
    for instance, state in states.items():
        output = state["output"]
        for step in STEPS:
            attempts = delivered[(instance, step)]
            assert attempts, f"{instance}: step {step} completed without its effect {context}"
            kept = int(output[step].split(":")[1])
            assert kept in attempts, f"{instance}: {step} kept attempt {kept} of {attempts}"
            assert max(attempts) == kept, (
                f"{instance}: step {step} ran again (attempts {attempts}) after its result "
                f"of attempt {kept} was recorded {context}"
            )
            assert len(attempts) == len(set(attempts)), f"{instance}: {step} attempt twice"
        if output["heard"] is not None:
            assert output["heard"] == instance, f"{instance} heard {output['heard']} {context}"
