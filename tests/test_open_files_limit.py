"""Under a low open-file limit, a burst of calls to new objects fails only while every
open file is busy: later calls and an evicted object's due alarm get through."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).with_name("_fd_burst.py")


def test_after_a_burst_past_the_fd_limit_calls_and_due_alarms_get_through(
    tmp_path: Path,
) -> None:
    """With 200 descriptors, 200 objects held busy at once exhaust them (some of those
    calls fail); afterwards every call, to new objects too, succeeds at once and the
    evicted object's alarm runs when it is due, while traffic goes on."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "data"), "200"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["burst_failed"] > 0, "the burst did not reach the limit"
    assert result["later_failures"] == []
    assert result["alarm_ran"] == [result["alarm_due"]]
