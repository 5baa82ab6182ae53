"""A mixed workload survives SIGKILL: nothing acknowledged is lost, nothing is stranded."""

from __future__ import annotations

import random
from pathlib import Path

from .mixed_soak import soak

QUICK_KILLS = 4


def test_mixed_workload_survives_repeated_kills(tmp_path: Path) -> None:
    """Operations, alarms, log appends, cursors and leases, killed 4 times, all check out."""
    figures = soak(tmp_path, QUICK_KILLS, random.randrange(1_000_000))
    assert figures["acknowledged"] > QUICK_KILLS * 10
