"""Deterministic simulation: the event topics example under seeded evictions and crashes.

On a virtual clock, seeded randomness drives concurrent producers and pollers of the
example's HTTP surface, and evictions and crashes of its partition objects at random
moments, so some land while a poll has handled a range and not yet acked it (between
the effect and its completion record). A producer whose request failed retries the
same events with the same deduplication keys until one is acknowledged. Afterwards a
quiet period (leases expire) and a drain: every acknowledged event must have been
handled, nothing handled that was never sent, and a repeat only where a reset could
explain it. A failing run names its seed; `DURABILITY_SIM_SEEDS=1234,...` replays
exactly those seeds.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from durability.runtime import Request, Runtime
from durability.runtime.server import load_worker
from durability.testing import VirtualClock

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "event_topics"
SEEDS = [
    int(seed) for seed in os.environ.get("DURABILITY_SIM_SEEDS", "11,23,37").split(",") if seed
]
STEPS = 60
KEYS = ["alice", "bob", "carol", "dave", "erin"]


class Simulation:
    """One seeded run of the example: its runtime, clock, and what the outside saw."""

    def __init__(self, seed: int, rt: Runtime, worker: Any, clock: VirtualClock) -> None:
        self.seed = seed
        self.module = sys.modules[worker.name]
        self.tasks: list[asyncio.Future[Any]] = []
        self.draining = False
        self.rng = random.Random(seed)
        self.rt = rt
        self.worker = worker
        self.clock = clock
        self.sent: set[str] = set()
        self.acknowledged: set[str] = set()
        self.handled: list[str] = []
        self.resets = 0

    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        text = None if body is None else json.dumps(body)
        response = await self.worker.fetch(
            Request(f"http://sim{path}", method=method, body=text), self.rt.env
        )
        return response.status, json.loads((await response.text()) or "null")

    async def produce(self, number: int) -> None:
        """Send 1-3 new events, retrying the same keys until they are acknowledged."""
        batch = [
            {
                "partitionKey": self.rng.choice(KEYS),
                "payload": f"e{number}-{i}",
                "key": f"e{number}-{i}",
            }
            for i in range(self.rng.randint(1, 3))
        ]
        self.sent |= {event["payload"] for event in batch}
        while True:
            try:
                status, _ = await self.request("POST", "/orders/events", batch)
            except Exception:  # an eviction or crash cut the request short
                await asyncio.sleep(0.05)
                continue
            assert status == 202, f"produce answered {status} (seed {self.seed})"
            self.acknowledged |= {event["payload"] for event in batch}
            return

    def handle(self, events: list[Any], fail_on: str | None) -> None:
        """The example's `handle`: record each event as handled (the effect), and now
        and then reset its partition before the poll can ack the range."""
        self.handled += [event["payload"] for event in events]
        if events and not self.draining and self.rng.random() < 0.3:
            partition = self.module.partition_for(events[0]["partitionKey"])
            self.tasks.append(asyncio.ensure_future(self.reset(partition)))

    async def poll(self) -> int | None:
        """Poll once; how many events it reported handled (`None`: it was cut short)."""
        try:
            status, handled = await self.request("POST", "/orders/groups/g/poll")
        except Exception:  # cut short: whatever it leased comes back after the lease
            return None
        assert status == 200, f"poll answered {status} (seed {self.seed})"
        return sum(len(lease["events"]) for lease in handled)

    async def reset(self, partition: int | None = None) -> None:
        """Crash or evict a partition (a random one if not given)."""
        number = self.rng.randrange(4) if partition is None else partition
        stub = self.rt.env.PARTITIONS.getByName(f"orders:{number}")
        await (self.rt.crash(stub) if self.rng.random() < 0.5 else self.rt.evict(stub))
        self.resets += 1

    async def run(self) -> None:
        for step in range(STEPS):
            roll = self.rng.random()
            if roll < 0.4:
                self.tasks.append(asyncio.ensure_future(self.produce(step)))
            elif roll < 0.75:
                self.tasks.append(asyncio.ensure_future(self.poll()))
            else:
                self.tasks.append(asyncio.ensure_future(self.reset()))
            await self.clock.advance(self.rng.choice([0, 1, 5, 50, 500]))
        while not all(task.done() for task in self.tasks):
            await asyncio.gather(*self.tasks)
        await self.drain()

    async def drain(self) -> None:
        """With no more resets, let every lease expire, then poll until one finds nothing."""
        self.draining = True
        for _ in range(20):
            await self.clock.advance(60_000)
            if await self.poll() == 0:
                return

    def check(self) -> None:
        context = f"(seed {self.seed}; replay with DURABILITY_SIM_SEEDS={self.seed})"
        missing = sorted(self.acknowledged - set(self.handled))
        assert not missing, f"acknowledged events never handled: {missing[:5]} {context}"
        phantoms = sorted(set(self.handled) - self.sent)
        assert not phantoms, f"handled events never sent: {phantoms[:5]} {context}"
        repeats = len(self.handled) - len(set(self.handled))
        assert repeats == 0 or self.resets > 0, f"repeats without a reset {context}"


async def simulate(seed: int, directory: Path) -> Simulation:
    worker = load_worker(str(EXAMPLE))
    clock = VirtualClock()
    async with Runtime(path=str(directory), bindings=worker.bindings, clock=clock) as rt:
        simulation = Simulation(seed, rt, worker, clock)
        simulation.module.handle = simulation.handle
        await simulation.run()
    return simulation


@pytest.mark.parametrize("seed", SEEDS)
async def test_event_topics_under_seeded_resets(seed: int, tmp_path: Path) -> None:
    """Every acknowledged event is handled despite resets at seeded random moments."""
    simulation = await simulate(seed, tmp_path / "a")
    simulation.check()
    assert simulation.resets > 0 and simulation.acknowledged


async def test_a_seed_replays_exactly(tmp_path: Path) -> None:
    """The same seed gives the same run: same events, same handling order, same resets."""
    first = await simulate(SEEDS[0], tmp_path / "a")
    second = await simulate(SEEDS[0], tmp_path / "b")
    assert (first.handled, first.acknowledged, first.resets) == (
        second.handled,
        second.acknowledged,
        second.resets,
    )
