"""Shared by the capability crash tests: run a child script and SIGKILL it mid-flight."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

READY_TIMEOUT_S = 30.0


def run_and_kill(
    script: Path,
    args: list[str],
    out_file: Path,
    rng: random.Random,
    *,
    kill_after_s: tuple[float, float] = (0.1, 0.6),
) -> list[str]:
    """Start `script`, SIGKILL it a random time after it printed "ready"; its complete lines.

    The child flushes each line only once what it reports is acknowledged, so the lines
    returned (a partly written last line dropped) are exactly what was acknowledged.
    """
    with out_file.open("wb") as out:
        child = subprocess.Popen(
            [sys.executable, str(script), *args],
            stdout=out,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            deadline = time.monotonic() + READY_TIMEOUT_S
            while b"ready\n" not in out_file.read_bytes():
                assert child.poll() is None, f"child exited early with {child.returncode}"
                assert time.monotonic() < deadline, "child never became ready"
                time.sleep(0.01)
            time.sleep(rng.uniform(*kill_after_s))
            child.send_signal(signal.SIGKILL)
        finally:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL, f"child ended with {child.returncode}"
    text = out_file.read_text()
    return text[: text.rfind("\n") + 1].splitlines()


def run_child(script: Path, *args: str, timeout_s: float = 60.0) -> tuple[int, list[str]]:
    """Run `script` once to its end or its own SIGKILL; its exit code and complete lines."""
    child = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        timeout=timeout_s,
        check=False,
    )
    text = child.stdout.decode()
    assert child.returncode in (0, -signal.SIGKILL), child.stderr.decode()[-2000:]
    return child.returncode, text[: text.rfind("\n") + 1].splitlines()
