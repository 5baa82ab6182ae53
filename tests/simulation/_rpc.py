"""The RPC transforms example: an increment is applied once per request id, whatever fails.

Clients send increments with request ids of their own (sometimes sending one again, as
a client retrying), the Worker retries failed calls through its transforms, and the
simulation crashes, evicts and fails the counters. Checks: an acknowledged request id
always answers the same value, values are never shared, the count never exceeds the ids
sent nor falls below those acknowledged, and once every id was sent until acknowledged
the count is exactly the number of ids.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from durability.testing import Scenario, Simulation, SimulationRun, nothing_stranded

from ._examples import project

COUNTERS = ("r0", "r1")


async def scenario(run: SimulationRun) -> None:
    sent: dict[str, list[str]] = defaultdict(list)
    values: dict[str, dict[str, int]] = defaultdict(dict)
    for number in run.steps():
        name = run.rng.choice(COUNTERS)
        roll = run.rng.random()
        if roll < 0.25:
            await run.advance(run.rng.randrange(1, 10_000))
        elif roll < 0.35 and sent[name]:
            await _increment(run, name, run.rng.choice(sent[name]), values[name])
        elif roll < 0.85:
            sent[name].append(f"req-{number}")
            await _increment(run, name, sent[name][-1], values[name])
        else:
            count = await _count(run, name)
            assert len(values[name]) <= count <= len(sent[name]), (name, count)
    run.disarm()
    for name in COUNTERS:
        for request_id in sent[name]:
            while not await _increment(run, name, request_id, values[name]):
                pass
        assert await _count(run, name) == len(sent[name]), name
        assert sorted(values[name].values()) == list(range(1, len(sent[name]) + 1)), name


async def cycle(run: SimulationRun) -> None:
    """Each path once, for exhaustive mode: an increment, the same id again, a count."""
    values: dict[str, int] = {}
    while not await _increment(run, "r0", "req-1", values):
        pass
    while not await _increment(run, "r0", "req-1", values):
        pass
    run.disarm()
    assert await _count(run, "r0") == 1


async def _increment(
    run: SimulationRun, name: str, request_id: str, values: dict[str, int]
) -> bool:
    """Send one increment; whether it was acknowledged (its value then checked)."""
    reply = await run.request("POST", f"/{name}/increment", headers={"x-request-id": request_id})
    if not reply.ok or reply.status != 200:
        assert not reply.ok or reply.status in (502, 504), reply
        return False
    value = values.setdefault(request_id, reply.value["value"])
    assert reply.value["value"] == value, f"{request_id} answered {reply.value}, then {value}"
    shared = [other for other, v in values.items() if v == value and other != request_id]
    assert not shared, f"{request_id} and {shared} share the value {value}"
    return True


async def _count(run: SimulationRun, name: str) -> int:
    while True:
        reply = await run.request("GET", f"/{name}")
        if reply.ok:
            count: int = reply.value["value"]
            return count


def simulation(scenario: Scenario = scenario, **options: Any) -> Simulation:
    return Simulation(
        project("rpc_transforms"), scenario, invariants=[nothing_stranded()], **options
    )
