"""One caller registering operations in series survives SIGKILL: after the last kill, a
new runtime that nobody calls wakes the object by its alarm and every acknowledged
call completes. This is the path where an operation's success and the next
registration share one sync, and the alarm is set and cleared by every call."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import time
from pathlib import Path

import pytest

from durability.runtime import Runtime

from ._kill import run_and_kill
from .one_caller_child import Series

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("one_caller_child.py")
RUNS = 3
RECOVERY_TIMEOUT_S = 20.0


def _object_file(data: Path) -> Path:
    [file] = [found for found in data.rglob("*.sqlite3") if found.name != "_catalog.sqlite3"]
    return file


def _unsettled(file: Path, acknowledged: list[str]) -> list[str]:
    """The acknowledged ids not yet completed with their effect, read from the file."""
    with sqlite3.connect(f"file:{file}?mode=ro", uri=True) as connection:
        completed = {
            row[0]
            for row in connection.execute(
                "SELECT c.id FROM durability_calls c JOIN effects e ON e.id = c.id"
                " WHERE c.status = 'completed'"
            )
        }
    connection.close()
    return [call_id for call_id in acknowledged if call_id not in completed]


async def test_acknowledged_calls_complete_after_kills_with_nobody_calling(
    tmp_path: Path,
) -> None:
    rng = random.Random(4021)
    data = tmp_path / "data"
    acknowledged: list[str] = []
    for run in range(RUNS):
        lines = await asyncio.to_thread(
            run_and_kill,
            CHILD,
            [str(data), str(run)],
            tmp_path / f"run-{run}.out",
            rng,
            kill_after_s=(0.2, 0.8),
        )
        acknowledged += [line for line in lines if line.startswith("op-")]
    assert acknowledged, "no registration was acknowledged"
    file = _object_file(data)
    async with Runtime(path=data, bindings={"SERIES": Series}):
        deadline = time.monotonic() + RECOVERY_TIMEOUT_S
        while unsettled := _unsettled(file, acknowledged):
            assert time.monotonic() < deadline, f"never completed: {unsettled[:5]}"
            await asyncio.sleep(0.1)
