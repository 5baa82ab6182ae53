"""Simulated RPC transforms: an increment is applied once per request id, whatever fails.

Clients send increments with request ids of their own (sometimes sending one again, as
a client retrying), the Worker retries failed calls through its transforms, and the
counters are evicted and crashed, some just after an increment returned. Checks: an
acknowledged request id always answers the same value, values are never shared, the
count never exceeds the ids sent nor falls below those acknowledged, and once every
id was sent until acknowledged the count is exactly the number of ids.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from ._sim import Simulation

COUNTERS = ("r0", "r1")
STEPS = 120


async def run(sim: Simulation, data: Path) -> None:
    runtime = await sim.serve("rpc_transforms", data)
    sent: dict[str, list[str]] = defaultdict(list)
    values: dict[str, dict[str, int]] = defaultdict(dict)
    for number in range(STEPS):
        name = sim.rng.choice(COUNTERS)
        roll = sim.rng.random()
        if roll < 0.2:
            await sim.advance(sim.rng.randrange(1, 10_000))
        elif roll < 0.3:
            await sim.strike(runtime.env.COUNTERS.get_by_name(name))
        elif roll < 0.4 and sent[name]:
            await _increment(sim, name, sim.rng.choice(sent[name]), values[name])
        elif roll < 0.85:
            sent[name].append(f"req-{number}")
            await _increment(sim, name, sent[name][-1], values[name])
        else:
            count = await _count(sim, name)
            assert len(values[name]) <= count <= len(sent[name]), (name, count)
    sim.disarm()
    for name in COUNTERS:
        for request_id in sent[name]:
            while not await _increment(sim, name, request_id, values[name]):
                pass
        assert await _count(sim, name) == len(sent[name]), name
        assert sorted(values[name].values()) == list(range(1, len(sent[name]) + 1)), name


async def _increment(sim: Simulation, name: str, request_id: str, values: dict[str, int]) -> bool:
    """Send one increment; whether it was acknowledged (its value then checked)."""
    headers = {"x-request-id": request_id}
    status, body = await sim.request("POST", f"/{name}/increment", headers=headers)
    if status != 200:
        assert status in (0, 502, 504), (status, body)
        return False
    value = values.setdefault(request_id, body["value"])
    assert body["value"] == value, f"{request_id} answered {body['value']}, then {value}"
    shared = [other for other, v in values.items() if v == value and other != request_id]
    assert not shared, f"{request_id} and {shared} share the value {value}"
    return True


async def _count(sim: Simulation, name: str) -> int:
    while True:
        status, body = await sim.request("GET", f"/{name}")
        if status == 200:
            count: int = body["value"]
            return count
