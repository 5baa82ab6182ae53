"""A named-alarm attempt cut short by SIGKILL still used up its attempt."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from .alarm_child import MAX_ATTEMPTS

CHILD = Path(__file__).with_name("alarm_child.py")
RUN_TIMEOUT_S = 60.0


def _run(data: Path) -> tuple[int, list[str]]:
    """Run the child once; its exit code and its complete output lines."""
    child = subprocess.run(
        [sys.executable, str(CHILD), str(data)],
        capture_output=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    text = child.stdout.decode()
    assert child.returncode in (0, -signal.SIGKILL), child.stderr.decode()[-2000:]
    return child.returncode, text[: text.rfind("\n") + 1].splitlines()


def test_a_handler_that_kills_its_process_exhausts_its_attempts(tmp_path: Path) -> None:
    """Each kill inside a named-alarm handler counts an attempt; then the occurrence fails
    for good instead of being retried forever."""
    data = tmp_path / "data"
    attempts: list[int] = []
    state: dict[str, object] | None = None
    for _ in range(MAX_ATTEMPTS + 2):
        code, lines = _run(data)
        attempts += [int(line.split()[1]) for line in lines if line.startswith("ring ")]
        if code == 0:
            state = json.loads(lines[-1].removeprefix("state "))
            break
    assert attempts == list(range(1, MAX_ATTEMPTS + 1))
    assert state is not None, "the alarm was still being retried"
    assert state == {
        "attempt": MAX_ATTEMPTS,
        "status": "failed",
        "error": "DurableAttemptsExhaustedError",
    }
