"""Simulated counter example: increments, resets and their alarm against a model.

A counter's value is what the acknowledged increments added since its reset alarm
fired. A call that failed (a crash just after it returned) may or may not have kept
its write, so the model then reads the counter back and accepts either outcome.
A reset comes due at its time but, when its `alarm()` crashes, runs again on the
runtime's retries: until those are surely over the counter is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._sim import Simulation

NAMES = ("c0", "c1", "c2")
STEPS = 120
RETRY_WINDOW_MS = 130_000
"""The runtime retries a failing `alarm()` after 2, 4, ... 64 s: 126 s in all."""


@dataclass
class Model:
    value: int = 0
    reset_at: int | None = None

    def state(self, name: str) -> dict[str, Any]:
        return {"name": name, "value": self.value, "reset_at_ms": self.reset_at}


async def run(sim: Simulation, data: Path) -> None:
    runtime = await sim.serve("counter", data)
    models = {name: Model() for name in NAMES}
    for _ in range(STEPS):
        _settle(models, sim.clock.now_ms())
        name = sim.rng.choice(NAMES)
        model = models[name]
        roll = sim.rng.random()
        if roll < 0.25:
            await sim.advance(sim.rng.randrange(1, 90_000))
        elif roll < 0.35:
            await sim.strike(runtime.env.COUNTERS.get_by_name(name))
        elif model.reset_at is not None and model.reset_at <= sim.clock.now_ms():
            continue  # Its reset may be retrying: leave it alone until settled.
        elif roll < 0.7:
            await _call(sim, name, model, "/increment", Model(model.value + 1, model.reset_at))
        elif roll < 0.8:
            seconds = sim.rng.randrange(1, 120)
            after = Model(model.value, sim.clock.now_ms() + seconds * 1000)
            await _call(sim, name, model, f"/reset-in/{seconds}", after)
        elif roll < 0.85:
            await _call(sim, name, model, "/cancel-reset", Model(model.value, None))
        else:
            assert await _read(sim, name) == model.state(name), name
    await sim.advance(RETRY_WINDOW_MS + 120_000)
    _settle(models, sim.clock.now_ms())
    for name, model in models.items():
        assert await _read(sim, name) == model.state(name), name


def _settle(models: dict[str, Model], now: int) -> None:
    """Resets whose retries are surely over have happened."""
    for model in models.values():
        if model.reset_at is not None and model.reset_at + RETRY_WINDOW_MS <= now:
            model.value, model.reset_at = 0, None


async def _call(sim: Simulation, name: str, model: Model, action: str, after: Model) -> None:
    """POST the action; acknowledged, the state is `after`; failed, it is either."""
    status, body = await sim.request("POST", f"/{name}{action}")
    if status == 200:
        assert body == after.state(name), (action, body)
        found = after
    else:
        assert status == 0, (action, status, body)
        state = await _read(sim, name)
        assert state in (model.state(name), after.state(name)), (action, state)
        found = after if state == after.state(name) else model
    model.value, model.reset_at = found.value, found.reset_at


async def _read(sim: Simulation, name: str) -> Any:
    """GET the counter's state, asking again while a crash interrupts the read."""
    while True:
        status, body = await sim.request("GET", f"/{name}")
        if status == 200:
            return body
