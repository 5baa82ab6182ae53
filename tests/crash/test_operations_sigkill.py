"""Durable operations and named alarms survive SIGKILL: acknowledged work runs, once per id."""

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
from .ops_child import MAX_ATTEMPTS, RUNS, bindings, targets

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("ops_child.py")
RECOVERY_TIMEOUT_S = 20.0


def _possible(call_id: str, last_acked: dict[str, int]) -> bool:
    """Whether the child could have tried to register `call_id`.

    Each caller registers its ids in sequence, so beyond its last acknowledged id it
    can only have started the next one when the kill came.
    """
    caller, _, sequence = call_id.rpartition("-")
    return int(sequence) <= last_acked.get(caller, -1) + 1


Results = dict[str, list[Any]]
Report = dict[str, list[list[Any]]]


async def _recover(
    data: Path, acknowledged: dict[str, int], alarms: set[tuple[str, int]]
) -> tuple[Results, Report]:
    """Run a fresh runtime until every acknowledged id settled and every alarm rang.

    Returns the calls' `[status, attempt, result]` and the ledger's tables, as they were
    then, or at the deadline.
    """
    by_target: dict[int, list[str]] = defaultdict(list)
    for call_id, target in acknowledged.items():
        by_target[target].append(call_id)
    async with Runtime(path=str(data), bindings=bindings) as runtime:
        stubs = targets(runtime.env)
        ledger = runtime.env.LEDGER.get_by_name("ledger")
        deadline = time.monotonic() + RECOVERY_TIMEOUT_S
        while True:
            results: Results = {}
            for target, ids in by_target.items():
                results |= await stubs[target].results(ids)
            report = await ledger.report()
            rang = {(name, at) for name, at, _ in report["rings"]}
            settled = all(status != "pending" for status, _, _ in results.values())
            if (settled and alarms <= rang) or time.monotonic() > deadline:
                return results, report
            await asyncio.sleep(0.1)


async def test_acknowledged_operations_and_alarms_survive_sigkill(tmp_path: Path) -> None:
    """Killed runs: every acknowledged call completes with one effect, every alarm fires."""
    seed = random.randrange(1_000_000)
    rng = random.Random(seed)
    data = tmp_path / "data"
    acknowledged: dict[str, int] = {}
    alarms: set[tuple[str, int]] = set()
    earlier = tmp_path / "earlier.txt"
    for run in range(RUNS):
        earlier.write_text("".join(f"{target} {i}\n" for i, target in acknowledged.items()))
        args = [str(data), str(seed * 100 + run), str(run), str(earlier)]
        for line in run_and_kill(CHILD, args, tmp_path / f"run{run}.out", rng):
            words = line.split(" ")
            if words[0] == "op":
                acknowledged[words[2]] = int(words[1])
            elif words[0] == "alarm":
                alarms.add((words[1], int(words[2])))
    assert len(acknowledged) > RUNS, f"too few registrations (seed {seed})"
    assert len(alarms) == RUNS, f"an alarm was not acknowledged (seed {seed})"
    # Restart only once every alarm is overdue: the last one must fire at start.
    await asyncio.sleep(max(0.0, max(at for _, at in alarms) / 1000 - time.time() + 0.05))

    results, report = await _recover(data, acknowledged, alarms)

    context = f"(seed {seed}, {len(acknowledged)} acknowledged)"
    not_done = sorted((i, r) for i, r in results.items() if r[0] != "completed")
    assert not not_done, f"{len(not_done)} calls not completed: {not_done[:5]} {context}"
    rang = {(name, at) for name, at, _ in report["rings"]}
    assert alarms <= rang, f"alarms {sorted(alarms - rang)} never fired {context}"
    rings = sorted((name, attempt) for name, _, attempt in report["rings"])
    assert len(rings) == len(set(rings)), f"an alarm attempt rang twice: {rings} {context}"

    effects = {call_id: attempt for call_id, attempt in report["effects"]}
    delivered: dict[str, list[int]] = defaultdict(list)
    for call_id, attempt in report["deliveries"]:
        delivered[call_id].append(attempt)
    for call_id, (_, attempt, result) in results.items():
        assert call_id in effects, f"{call_id} completed without its effect {context}"
        assert result == attempt <= MAX_ATTEMPTS, f"{call_id}: result {result}, attempt {attempt}"
        assert attempt == max(delivered[call_id]), f"{call_id}: delivered {delivered[call_id]}"
    # An attempt delivered twice was not counted first, or a registered-again id reran.
    repeated = sorted((i, a) for i, a in delivered.items() if len(a) != len(set(a)))
    assert not repeated, f"attempts delivered twice: {repeated[:5]} {context}"

    last_acked: dict[str, int] = {}
    for call_id in acknowledged:
        caller, _, sequence = call_id.rpartition("-")
        last_acked[caller] = max(last_acked.get(caller, -1), int(sequence))
    phantoms = [i for i in delivered.keys() | effects.keys() if not _possible(i, last_acked)]
    assert not phantoms, f"never registered, yet ran: {phantoms[:5]} {context}"
