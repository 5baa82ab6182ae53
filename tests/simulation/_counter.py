"""The counter example against a model: increments, resets and their alarm.

A counter's value is what the acknowledged increments added since its reset alarm
fired. A request that failed (its object crashed before or after its commit, or the
commit failed) may or may not have kept its write, so the model then reads the counter
back and accepts either outcome. A reset comes due at its time but, when its `alarm()`
crashes, runs again on the runtime's retries (and may be delivered late): until those
are surely over the counter is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from durability.testing import Scenario, Simulation, SimulationRun, nothing_stranded

from ._examples import project

NAMES = ("c0", "c1", "c2")
RETRY_WINDOW_MS = 135_000
"""The runtime retries a failing `alarm()` after 2, 4, ... 64 s (126 s in all), and an
alarm may be delivered up to 2 s late each time."""


@dataclass
class Model:
    value: int = 0
    reset_at: int | None = None

    def state(self, name: str) -> dict[str, Any]:
        return {"name": name, "value": self.value, "reset_at_ms": self.reset_at}


async def scenario(run: SimulationRun) -> None:
    models = {name: Model() for name in NAMES}
    for _ in run.steps():
        _settle(models, run.now_ms())
        name = run.rng.choice(NAMES)
        model = models[name]
        roll = run.rng.random()
        if roll < 0.3:
            await run.advance(run.rng.randrange(1, 90_000))
        elif model.reset_at is not None and model.reset_at <= run.now_ms():
            continue  # Its reset may be retrying: leave it alone until settled.
        elif roll < 0.7:
            await _call(run, name, model, "/increment", Model(model.value + 1, model.reset_at))
        elif roll < 0.8:
            seconds = run.rng.randrange(1, 120)
            after = Model(model.value, run.now_ms() + seconds * 1000)
            await _call(run, name, model, f"/reset-in/{seconds}", after)
        elif roll < 0.85:
            await _call(run, name, model, "/cancel-reset", Model(model.value, None))
        else:
            assert await _read(run, name) == model.state(name), name
    run.disarm()
    await run.advance(RETRY_WINDOW_MS + 120_000)
    _settle(models, run.now_ms())
    for name, model in models.items():
        assert await _read(run, name) == model.state(name), name


async def cycle(run: SimulationRun) -> None:
    """Each handler once, for exhaustive mode: increment, arm the reset, let it ring."""
    model = Model()
    await _call(run, "c0", model, "/increment", Model(1, None))
    while model.reset_at is None:  # a client asks again until the reset is armed
        await _call(run, "c0", model, "/reset-in/5", Model(model.value, run.now_ms() + 5_000))
    run.disarm()
    await run.advance(RETRY_WINDOW_MS + 10_000)
    assert await _read(run, "c0") == Model().state("c0")


def _settle(models: dict[str, Model], now: int) -> None:
    """Resets whose retries are surely over have happened."""
    for model in models.values():
        if model.reset_at is not None and model.reset_at + RETRY_WINDOW_MS <= now:
            model.value, model.reset_at = 0, None


async def _call(run: SimulationRun, name: str, model: Model, action: str, after: Model) -> None:
    """POST the action; acknowledged, the state is `after`; failed, it is either."""
    reply = await run.request("POST", f"/{name}{action}")
    if reply.ok:
        assert (reply.status, reply.value) == (200, after.state(name)), (action, reply)
        found = after
    else:
        state = await _read(run, name)
        assert state in (model.state(name), after.state(name)), (action, state)
        found = after if state == after.state(name) else model
    model.value, model.reset_at = found.value, found.reset_at


async def _read(run: SimulationRun, name: str) -> Any:
    """GET the counter's state, asking again while a crash interrupts the read."""
    while True:
        reply = await run.request("GET", f"/{name}")
        if reply.ok:
            assert reply.status == 200, reply
            return reply.value


def simulation(scenario: Scenario = scenario, **options: Any) -> Simulation:
    return Simulation(project("counter"), scenario, invariants=[nothing_stranded()], **options)
