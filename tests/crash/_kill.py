"""Shared by the capability crash tests: run a child script and SIGKILL it mid-flight."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

READY_TIMEOUT_S = 30.0
RUN_SPAN_MS = 3_600_000
"""The most virtual time one run of a child on a virtual clock may use (see `clock_start`)."""


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
    lines, own_kill = run_until_killed(script, args, out_file, rng, kill_after_s=kill_after_s)
    assert not own_kill, "the child died of SIGKILL before it was sent one"
    return lines


def run_until_killed(
    script: Path,
    args: list[str],
    out_file: Path,
    rng: random.Random,
    *,
    kill_after_s: tuple[float, float] = (0.1, 0.6),
) -> tuple[list[str], bool]:
    """Like `run_and_kill`, for a child that may SIGKILL itself at any time, "ready" or
    not: its complete lines, and whether it died of its own SIGKILL before the one sent
    a random time after "ready"."""
    with out_file.open("wb") as out:
        child = subprocess.Popen(
            [sys.executable, str(script), *args],
            stdout=out,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            deadline = time.monotonic() + READY_TIMEOUT_S
            while b"ready\n" not in out_file.read_bytes() and child.poll() is None:
                assert time.monotonic() < deadline, "child never became ready"
                time.sleep(0.01)
            kill_at = time.monotonic() + rng.uniform(*kill_after_s)
            while child.poll() is None and time.monotonic() < kill_at:
                time.sleep(0.01)
            own_kill = child.poll() is not None
            child.send_signal(signal.SIGKILL)
        finally:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL, f"child ended with {child.returncode}"
    text = out_file.read_text()
    return text[: text.rfind("\n") + 1].splitlines(), own_kill


def clock_start(run: int) -> str:
    """The start of the virtual clock of run number `run` (from 0) of a child that waits
    out retries and backoffs on a virtual clock: a run starts RUN_SPAN_MS after the one
    before it did, so time never goes back from one run to the next, whenever a kill
    cut that run short."""
    return str(1_700_000_000_000 + run * RUN_SPAN_MS)


def run_child(
    script: Path, *args: str, timeout_s: float = 60.0, out_file: Path | None = None
) -> tuple[int, list[str]]:
    """Run `script` once to its end or its own SIGKILL; its exit code and complete lines
    (written to `out_file` if given: a child that fsyncs its output needs a file)."""
    with out_file.open("w+b") if out_file is not None else tempfile.TemporaryFile() as out:
        child = subprocess.run(
            [sys.executable, str(script), *args],
            stdout=out,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            timeout=timeout_s,
            check=False,
        )
        out.seek(0)
        text = out.read().decode()
    assert child.returncode in (0, -signal.SIGKILL), child.stderr.decode()[-2000:]
    return child.returncode, text[: text.rfind("\n") + 1].splitlines()
