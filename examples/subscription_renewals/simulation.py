"""This project under `durability.testing.Simulation`: customers subscribe, cancel and look
at their subscription over HTTP while days pass, objects crash and evict, and the payments
service is slow or fails.

`PAYMENTS` is a fake here (`FakePayments`): it records each charge in the run's ledger,
under the idempotency key the operation gave it, for the customer and billing period it
is for. The invariants: no period charged under two keys (a renewal retried after a
crash registers the same charge), every completed charge reached the provider, and
nothing is left stranded. `simulation()` builds it for this folder, or for a copy of it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from durability.testing import (
    Simulation,
    SimulationRun,
    charged_once,
    effects_at_least_once,
    nothing_stranded,
)

PROJECT = Path(__file__).resolve().parent
CUSTOMERS = ("ann", "bob")
PERIOD_S = 86_400
"""Renewals come daily: a few of them in a run."""
STEPS = 100


class FakePayments:
    """Takes each charge once per idempotency key, as the real provider does, and writes
    it in the run's ledger for the invariants."""

    def __init__(self, run: SimulationRun) -> None:
        self.ledger = run.ledger

    def getByName(self, name: str) -> FakePayments:
        return self

    async def charge(self, idempotency_key: str, customer_id: str, period_start: int) -> str:
        self.ledger.record(idempotency_key, subject=(customer_id, period_start))
        return idempotency_key


async def scenario(run: SimulationRun) -> None:
    """Each step, one customer subscribes, cancels or looks, or time moves on."""
    for _ in run.steps():
        customer = run.rng.choice(CUSTOMERS)
        roll = run.rng.random()
        if roll < 0.2:
            reply = await run.request("POST", f"/{customer}/subscribe?period={PERIOD_S}")
            assert not reply.ok or reply.status == 201, reply
        elif roll < 0.25:
            await run.request("POST", f"/{customer}/cancel")
        elif roll < 0.6:
            reply = await run.request("GET", f"/{customer}")
            assert not reply.ok or reply.status == 200, reply
        else:
            await run.advance(run.rng.randrange(60_000, PERIOD_S * 1000 // 4))


def bindings(run: SimulationRun) -> dict[str, Any]:
    return {"PAYMENTS": FakePayments(run)}


def simulation(project: str | os.PathLike[str] = PROJECT, **options: Any) -> Simulation:
    """The simulation of the project in `project` (this folder, or a changed copy)."""
    return Simulation(
        project,
        scenario,
        bindings=bindings,
        invariants=[charged_once(), effects_at_least_once("charge_invoice"), nothing_stranded()],
        steps=STEPS,
        **options,
    )
