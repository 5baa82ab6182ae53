"""The subscription renewals example against a model: every period charged exactly once,
nothing after cancel.

Customers subscribe (a one-day period), subscribe again and cancel at random times while
the clock moves and the simulation crashes, evicts and fails things. The payments
provider is a fake bound as PAYMENTS that records each charge in the run's ledger (the
simulation slows it, fails it, and crashes the subscription around its effect). Checks:
each renewal slot of each subscription is charged (slot times from the subscribe call,
up to the cancel), under one key (`charged_once`), and GET shows the schedule.
Customers are only acted on away from their renewals (`SAFE_MS`), where the model knows
exactly what must have happened.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from durability.testing import (
    Scenario,
    Simulation,
    SimulationRun,
    charged_once,
    effects_at_least_once,
    nothing_stranded,
)

from ._examples import project

CUSTOMERS = ("s0", "s1", "s2", "s3")
PERIOD_S = 24 * 60 * 60
PERIOD_MS = PERIOD_S * 1000
SAFE_MS = 2 * 60 * 60 * 1000
"""Longer than any retry a fault causes: a renewal this far back is settled."""


class Payments:
    """A fake payments provider: one charge per key, each written in the ledger."""

    def __init__(self, run: SimulationRun) -> None:
        self.run = run

    def getByName(self, name: str) -> Payments:
        return self

    async def charge(self, key: str, customer_id: str, period_start: int) -> str:
        self.run.ledger.record(key, subject=(customer_id, period_start))
        return key


@dataclass
class Customer:
    """One customer's subscriptions: `[start, stop]` spans, the last open while active."""

    spans: list[list[int | None]] = field(default_factory=list)

    def active_start(self) -> int | None:
        return self.spans[-1][0] if self.spans and self.spans[-1][1] is None else None

    def safe(self, now: int) -> bool:
        """Whether no renewal of the active span is within SAFE_MS of `now`."""
        start = self.active_start()
        if start is None:
            return True
        since = (now - start) % PERIOD_MS
        return (now - start < PERIOD_MS or since >= SAFE_MS) and PERIOD_MS - since >= SAFE_MS

    def next_renewal(self, now: int) -> int | None:
        start = self.active_start()
        return None if start is None else start + ((now - start) // PERIOD_MS + 1) * PERIOD_MS

    def slots(self) -> list[int]:
        """Every renewal time that must have been charged."""
        found = []
        for start, stop in self.spans:
            assert start is not None and stop is not None
            found += list(range(start + PERIOD_MS, stop, PERIOD_MS))
        return found


async def scenario(run: SimulationRun) -> None:
    customers = {name: Customer() for name in CUSTOMERS}
    for _ in run.steps():
        name = run.rng.choice(CUSTOMERS)
        customer = customers[name]
        roll = run.rng.random()
        if roll < 0.4:
            await run.advance(run.rng.randrange(60_000, PERIOD_MS // 2))
        elif not customer.safe(run.now_ms()):
            continue
        elif roll < 0.65:
            await _subscribe(run, name, customer)
        elif roll < 0.75:
            await _cancel(run, name, customer)
        else:
            await _check_state(run, name, customer)
    run.disarm()
    for name, customer in customers.items():
        while not customer.safe(run.now_ms()):
            await run.advance(SAFE_MS)
        await _cancel(run, name, customer)
    await run.advance(2 * PERIOD_MS)
    for name, customer in customers.items():
        charged = sorted(start for who, start in _subjects(run) if who == name)
        assert charged == sorted(customer.slots()), name


def _subjects(run: SimulationRun) -> list[tuple[str, int]]:
    """What each charge key was first recorded for: (customer, period start)."""
    return [cast(tuple[str, int], subject) for subject in run.ledger.keys().values()]


async def cycle(run: SimulationRun) -> None:
    """Each handler once, for exhaustive mode: subscribe, a renewal and its charge, cancel."""
    customer = Customer()
    await _subscribe(run, "s0", customer)
    await run.advance(PERIOD_MS + SAFE_MS)
    await _cancel(run, "s0", customer)
    run.disarm()
    await run.advance(PERIOD_MS)
    charged = sorted(start for _, start in _subjects(run))
    assert charged == customer.slots() and len(charged) == 1, charged


async def _subscribe(run: SimulationRun, name: str, customer: Customer) -> None:
    """Subscribe, asking again (at the same instant) until it is acknowledged."""
    while not (reply := await run.request("POST", f"/{name}/subscribe?period={PERIOD_S}")).ok:
        pass
    now = run.now_ms()
    assert (reply.status, reply.value) == (
        201,
        {"subscribed": name, "next_renewal_at": now + PERIOD_MS},
    ), reply
    if customer.active_start() is not None:
        customer.spans[-1][1] = now
    customer.spans.append([now, None])


async def _cancel(run: SimulationRun, name: str, customer: Customer) -> None:
    while not (reply := await run.request("POST", f"/{name}/cancel")).ok:
        pass
    assert reply.status == 200, reply
    if customer.active_start() is not None:
        customer.spans[-1][1] = run.now_ms()


async def _check_state(run: SimulationRun, name: str, customer: Customer) -> None:
    reply = await run.request("GET", f"/{name}")
    if not reply.ok:
        return  # A crash cut the read short.
    expected: dict[str, Any] = {
        "customer_id": name if customer.active_start() is not None else None,
        "next_renewal_at": customer.next_renewal(run.now_ms()),
    }
    assert (reply.status, reply.value) == (200, expected), name


def simulation(scenario: Scenario = scenario, **options: Any) -> Simulation:
    return Simulation(
        project("subscription_renewals"),
        scenario,
        bindings=lambda run: {"PAYMENTS": Payments(run)},
        invariants=[charged_once(), effects_at_least_once("charge_invoice"), nothing_stranded()],
        **options,
    )
