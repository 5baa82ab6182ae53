"""A poison item that kills its process exhausts only its own attempts (SIGKILL, for each
executor): every innocent item beside it completes, the poison alone fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from ._kill import clock_start, run_child
from .poison_child import ITEMS, MAX_ATTEMPTS, POISON, name_of

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("poison_child.py")
MAX_RUNS = 4 * MAX_ATTEMPTS + 4
"""Runs the test allows: the first, then one per item run alone at most until it
settles, and a few for kills that land while an alarm pass starts."""


@pytest.mark.parametrize(
    "executor", ["operations", "operations-queued", "alarms", "fanout", "workflows"]
)
def test_a_poison_among_twenty_fails_alone_and_every_other_item_completes(
    tmp_path: Path, executor: str
) -> None:
    """One item of 20, due together, kills the process each time it runs (for workflows:
    the one step of an instance): restarted until the child finishes, every other item
    completes (run at least once), and the poison fails exhausted, its attempts all
    interrupted ones it ran alone."""
    data = tmp_path / "data"
    kills = 0
    lines: list[str] = []
    for run in range(MAX_RUNS):
        code, lines = run_child(CHILD, str(data), executor, clock_start(run))
        if code == 0:
            break
        kills += 1
    assert lines and lines[-1] == "done", f"the child never finished ({kills} kills)"
    states = {
        fields[1]: fields[2:]
        for fields in (line.split("\t") for line in lines)
        if fields[0] == "state"
    }
    ran = {fields[1] for fields in (line.split("\t") for line in lines) if fields[0] == "ran"}
    poison = name_of(POISON)
    innocent = {name_of(number) for number in range(ITEMS)} - {poison}
    assert {name for name, state in states.items() if state[0] != "completed"} == {poison}
    assert ran == innocent
    status, attempt, error = states[poison]
    assert status == ("failed:interrupted" if executor == "fanout" else "failed")
    assert f"exhausted its {MAX_ATTEMPTS} attempts" in error
    # Every kill was the poison's: each of its runs was one interrupted attempt, and only
    # the last MAX_ATTEMPTS of them (run alone) counted.
    assert (int(attempt), error.split("(")[1].split(" ")[0]) == (kills, str(kills))
    assert kills > MAX_ATTEMPTS
