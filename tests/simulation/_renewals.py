"""Simulated subscription renewals: every period charged once, nothing after cancel.

Customers subscribe (a one-day period), subscribe again and cancel at random times,
while the clock moves and objects are evicted and crashed. The payments provider is a
fake bound as PAYMENTS: it takes one charge per idempotency key and, now and then,
crashes the calling subscription right after taking a charge, before the durable
operation recorded it. Checks: each renewal slot of each subscription is charged
exactly once (slot times from the subscribe call, up to the cancel), a key is charged
again only after a crash or eviction of its subscriber, and GET shows the schedule.
Customers are only acted on away from their renewals (`SAFE_MS`), where the model
knows exactly what must have happened.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._sim import Simulation

CUSTOMERS = ("s0", "s1", "s2", "s3")
PERIOD_S = 24 * 60 * 60
PERIOD_MS = PERIOD_S * 1000
SAFE_MS = 2 * 60 * 60 * 1000
"""Longer than any retry a crash causes: a renewal this far back is settled."""
STEPS = 120


class Payments:
    """A fake payments provider: one charge per key; may crash its caller after one."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.charges: dict[str, tuple[str, int]] = {}
        self.first_charged: dict[str, int] = {}
        self.repeats = 0
        self.unexplained: list[str] = []

    def getByName(self, name: str) -> Payments:
        return self

    async def charge(self, key: str, customer_id: str, period_start: int) -> str:
        if key in self.charges:
            self.repeats += 1
            if not self.sim.struck_since(customer_id, self.first_charged[key]):
                self.unexplained.append(key)
        else:
            self.charges[key] = (customer_id, period_start)
            self.first_charged[key] = self.sim.clock.now_ms()
        runtime = self.sim.runtime
        assert runtime is not None
        await self.sim.maybe_crash(runtime.env.SUBSCRIPTIONS.get_by_name(customer_id), "charge")
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


async def run(sim: Simulation, data: Path) -> None:
    payments = Payments(sim)
    runtime = await sim.serve("subscription_renewals", data, {"PAYMENTS": payments})
    customers = {name: Customer() for name in CUSTOMERS}
    for _ in range(STEPS):
        name = sim.rng.choice(CUSTOMERS)
        customer = customers[name]
        roll = sim.rng.random()
        if roll < 0.35:
            await sim.advance(sim.rng.randrange(60_000, PERIOD_MS // 2))
        elif roll < 0.45:
            await sim.strike(runtime.env.SUBSCRIPTIONS.get_by_name(name))
        elif not customer.safe(sim.clock.now_ms()):
            continue
        elif roll < 0.65:
            await _subscribe(sim, name, customer)
        elif roll < 0.75:
            await _cancel(sim, name, customer)
        else:
            await _check_state(sim, name, customer)
    sim.disarm()
    for name, customer in customers.items():
        while not customer.safe(sim.clock.now_ms()):
            await sim.advance(SAFE_MS)
        await _cancel(sim, name, customer)
    await sim.advance(2 * PERIOD_MS)

    assert not payments.unexplained, f"charged again with no crash: {payments.unexplained}"
    for name, customer in customers.items():
        charged = sorted(start for who, start in payments.charges.values() if who == name)
        assert charged == sorted(customer.slots()), name


async def _subscribe(sim: Simulation, name: str, customer: Customer) -> None:
    """Subscribe, asking again (at the same instant) until it is acknowledged."""
    while True:
        status, body = await sim.request("POST", f"/{name}/subscribe?period={PERIOD_S}")
        if status == 201:
            break
        assert status == 0, (status, body)
    now = sim.clock.now_ms()
    assert body == {"subscribed": name, "next_renewal_at": now + PERIOD_MS}, body
    if customer.active_start() is not None:
        customer.spans[-1][1] = now
    customer.spans.append([now, None])


async def _cancel(sim: Simulation, name: str, customer: Customer) -> None:
    while (reply := await sim.request("POST", f"/{name}/cancel"))[0] != 200:
        assert reply[0] == 0, reply
    if customer.active_start() is not None:
        customer.spans[-1][1] = sim.clock.now_ms()


async def _check_state(sim: Simulation, name: str, customer: Customer) -> None:
    status, body = await sim.request("GET", f"/{name}")
    if status == 0:
        return  # A crash cut the read short.
    expected: dict[str, Any] = {
        "customer_id": name if customer.active_start() is not None else None,
        "next_renewal_at": customer.next_renewal(sim.clock.now_ms()),
    }
    assert (status, body) == (200, expected), name
