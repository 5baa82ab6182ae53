"""The event topics example with concurrent producers and pollers, every handled event seen.

Each step starts a few producers and pollers at once (their requests interleave at
every await of the partitions they reach), then lets time pass. The example's `handle`
is replaced, for the run, by one that records each event handled: the effect a crash
between handling a range and acking it repeats. Producers send keyed events again
until acknowledged. After a quiet period (leases expire) and a drain: every
acknowledged event was handled, nothing never sent was, and events were handled again
only in a run that had faults.
"""

from __future__ import annotations

import asyncio
from typing import Any

from durability.testing import Scenario, Simulation, SimulationRun, log_offsets_contiguous

from ._examples import project

KEYS = ("alice", "bob", "carol", "dave", "erin")
LEASE_EXPIRY_MS = 31_000


async def scenario(run: SimulationRun) -> None:
    sent: set[str] = set()
    acknowledged: set[str] = set()
    handled: list[str] = []
    run.module.handle = lambda events, fail_on: handled.extend(e["payload"] for e in events)

    async def produce(number: int) -> None:
        batch = [
            {
                "partitionKey": run.rng.choice(KEYS),
                "payload": f"e{number}-{i}",
                "key": f"e{number}-{i}",
            }
            for i in range(run.rng.randint(1, 3))
        ]
        sent.update(event["payload"] for event in batch)
        while not (reply := await run.request("POST", "/orders/events", batch)).ok:
            pass
        assert reply.status == 202, reply
        acknowledged.update(event["payload"] for event in batch)

    async def poll() -> None:
        reply = await run.request("POST", "/orders/groups/g/poll")
        assert not reply.ok or reply.status == 200, reply

    for number in run.steps():
        starts = [produce(number * 10 + i) if run.rng.random() < 0.5 else poll() for i in range(3)]
        await asyncio.gather(*starts)
        await run.advance(run.rng.choice([0, 1, 5, 50, 500, 5_000]))
    run.disarm()
    for _ in range(20):
        await run.advance(LEASE_EXPIRY_MS)
        before = len(handled)
        await poll()
        if len(handled) == before:
            break
    missing = sorted(acknowledged - set(handled))
    assert not missing, f"acknowledged events never handled: {missing[:5]}"
    phantoms = sorted(set(handled) - sent)
    assert not phantoms, f"handled events never sent: {phantoms[:5]}"
    repeats = len(handled) - len(set(handled))
    assert repeats == 0 or run.faults, "events handled again in a run without faults"
    run.seen["repeats"] = repeats


def simulation(scenario: Scenario = scenario, **options: Any) -> Simulation:
    return Simulation(
        project("event_topics"), scenario, invariants=[log_offsets_contiguous()], **options
    )
