"""A named-alarm attempt cut short by SIGKILL while it ran alone used up its attempt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ._kill import clock_start, run_child
from .alarm_child import MAX_ATTEMPTS

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("alarm_child.py")


def test_a_handler_that_kills_its_process_exhausts_its_attempts(tmp_path: Path) -> None:
    """Each kill inside a named-alarm handler run alone counts an attempt; then the
    occurrence fails for good instead of being retried forever. Its first run held one
    permit of ten (not alone: something else could have started beside it), so that
    kill is spared, and it runs once more than its attempts."""
    data = tmp_path / "data"
    attempts: list[int] = []
    state: dict[str, object] | None = None
    for run in range(MAX_ATTEMPTS + 3):
        code, lines = run_child(CHILD, str(data), clock_start(run))
        attempts += [int(line.split()[1]) for line in lines if line.startswith("ring ")]
        if code == 0:
            state = json.loads(lines[-1].removeprefix("state "))
            break
    assert attempts == list(range(1, MAX_ATTEMPTS + 2))
    assert state is not None, "the alarm was still being retried"
    assert state == {
        "attempt": MAX_ATTEMPTS + 1,
        "status": "failed",
        "error": "DurableAttemptsExhaustedError",
    }
