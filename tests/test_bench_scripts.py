"""Every benchmark script still imports and parses its arguments (they are not run in
the suite: they measure speed, which tests never do)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parent.parent / "bench"
SCRIPTS = sorted(
    path for path in BENCH.glob("*.py") if 'if __name__ == "__main__":' in path.read_text()
)


def test_there_are_benchmark_scripts() -> None:
    """The glob finds the scripts (an empty list would make the test below vacuous)."""
    assert {"operations.py", "objects.py", "fanout.py", "peers.py"} <= {p.name for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=[path.stem for path in SCRIPTS])
def test_benchmark_script_shows_its_usage(script: Path) -> None:
    """`python bench/<script> --help` exits 0 and prints its usage (imports resolve,
    the argument parser is built) without the optional [bench] extra."""
    done = subprocess.run(
        [sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:")
