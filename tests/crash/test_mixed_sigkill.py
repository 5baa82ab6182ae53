"""A mixed workload survives SIGKILL, poisons included: nothing acknowledged is lost,
nothing is stranded, and only the poisons fail."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from .mixed_soak import soak

pytestmark = pytest.mark.slow

QUICK_KILLS = 4


def test_mixed_workload_with_poisons_survives_repeated_kills(tmp_path: Path) -> None:
    """Operations, alarms, log appends, cursors, leases and fanout, killed 4 times with
    one poison of each executor brought in (and killed again until those fail): all
    check out, and each poison alone failed or was dead-lettered."""
    figures = soak(tmp_path, QUICK_KILLS, random.randrange(1_000_000), every=QUICK_KILLS)
    assert figures["acknowledged"] > QUICK_KILLS * 10
    assert figures["poison operations"] == figures["poison alarms"] == 1
    assert figures["dead-lettered"] + figures["dropped"] == 1
    assert figures["poison kills"] >= 3
