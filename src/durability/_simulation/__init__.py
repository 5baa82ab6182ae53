"""Deterministic simulation of a worker's objects under faults (`durability.testing`).

`simulation` holds `Simulation` (seeds, exhaustive sweeps, replays), `runner` one run,
`run` what a scenario drives, `plan` and `injector` the faults, `outside` the outside
services, `invariants` and `ledger` the ready-made checks, `shrink` the shrinking.
"""

from __future__ import annotations

from .invariants import (
    Invariant,
    appends_kept,
    charged_once,
    effects_at_least_once,
    log_offsets_contiguous,
    nothing_stranded,
)
from .ledger import Effect, Ledger
from .outcome import SimulationFailure, SimulationReport
from .plan import FaultRates
from .run import Reply, SimulationRun
from .runner import Scenario
from .simulation import Simulation
from .state import StoredObject

__all__ = [
    "Effect",
    "FaultRates",
    "Invariant",
    "Ledger",
    "Reply",
    "Scenario",
    "Simulation",
    "SimulationFailure",
    "SimulationReport",
    "SimulationRun",
    "StoredObject",
    "appends_kept",
    "charged_once",
    "effects_at_least_once",
    "log_offsets_contiguous",
    "nothing_stranded",
]
