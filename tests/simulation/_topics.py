"""Simulated event topics: accepted events reach every group; keys store once.

Producers post small batches (most events keyed; a failed keyed batch is posted again,
as a producer retries, and now and then an acknowledged one is too), two consumer
groups poll, the clock moves and partitions are evicted and crashed, some of them just
after an append, lease or ack returned. Checks: a keyed event keeps the partition and
offset it was first given; no group is handed an event that was never posted; once the
faults stop and leases expire, each group's cursor has passed every record of every
partition (each range acked, or parked after its attempts ran out); a fresh group
then reads every accepted event, and every stored event exactly once.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._sim import Simulation

TOPIC = "orders"
GROUPS = ("billing", "search")
KEYS = tuple(f"user-{n}" for n in range(6))
STEPS = 150
LEASE_EXPIRY_MS = 31_000
"""Just past the example's 30 s lease: held ranges come back."""


@dataclass
class Topic:
    """What the producers and groups saw acknowledged."""

    accepted: set[str] = field(default_factory=set)
    maybe: set[str] = field(default_factory=set)
    """Events of an unkeyed batch that failed: stored or not."""
    offsets: dict[str, list[int]] = field(default_factory=dict)
    """Keyed event -> [partition, offset] it was acknowledged at."""
    batches: list[list[dict[str, Any]]] = field(default_factory=list)
    """Acknowledged batches whose every event is keyed: safe to post again."""
    delivered: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    sequence: int = 0


async def run(sim: Simulation, data: Path) -> None:
    runtime = await sim.serve("event_topics", data)
    topic = Topic()
    for _ in range(STEPS):
        roll = sim.rng.random()
        if roll < 0.2:
            await sim.advance(sim.rng.randrange(1_000, 120_000))
        elif roll < 0.3:
            partition = f"{TOPIC}:{sim.rng.randrange(sim.module.PARTITIONS)}"
            await sim.strike(runtime.env.PARTITIONS.get_by_name(partition))
        elif roll < 0.6:
            await _produce(sim, topic, _new_batch(sim, topic))
        elif roll < 0.65 and topic.batches:
            await _produce(sim, topic, sim.rng.choice(topic.batches))
        else:
            await _poll(sim, topic, sim.rng.choice(GROUPS))
    sim.disarm()
    for group in GROUPS:
        await _drain(sim, topic, group)
    status, partitions = await sim.request("GET", f"/{TOPIC}")
    assert status == 200, partitions
    for group in GROUPS:
        behind = [p for p in partitions if p["cursors"].get(group, 0) != p["next_offset"]]
        assert not behind, f"{group} left records behind: {behind}"
        invented = set(topic.delivered[group]) - topic.accepted - topic.maybe
        assert not invented, f"{group} got events never posted: {sorted(invented)[:5]}"
    await _drain(sim, topic, "audit")
    stored = topic.delivered["audit"]
    twice = [payload for payload, count in stored.items() if count > 1]
    assert not twice, f"stored more than once: {twice[:5]}"
    assert topic.accepted <= set(stored) <= topic.accepted | topic.maybe


def _new_batch(sim: Simulation, topic: Topic) -> list[dict[str, Any]]:
    batch = []
    for _ in range(sim.rng.randint(1, 4)):
        topic.sequence += 1
        payload = f"e{topic.sequence}"
        event = {"partitionKey": sim.rng.choice(KEYS), "payload": payload}
        if sim.rng.random() < 0.7:
            event["key"] = payload
        batch.append(event)
    return batch


async def _produce(sim: Simulation, topic: Topic, batch: list[dict[str, Any]]) -> None:
    """Post `batch`; a keyed batch that fails is posted again until acknowledged."""
    keyed = all("key" in event for event in batch)
    while True:
        status, body = await sim.request("POST", f"/{TOPIC}/events", batch)
        if status == 202 or not keyed:
            break
        assert status == 0, (status, body)
    payloads = [event["payload"] for event in batch]
    if status != 202:
        assert status == 0, (status, body)
        topic.maybe.update(payloads)
        return
    topic.accepted.update(payloads)
    if keyed and batch not in topic.batches:
        topic.batches.append(batch)
    for partition, result in body.items():
        mine = [e for e in batch if str(_partition_of(sim, e["partitionKey"])) == partition]
        for event, offset in zip(mine, result["value"], strict=True):
            if "key" in event:
                place = [int(partition), offset]
                known = topic.offsets.setdefault(event["payload"], place)
                assert known == place, f"{event['payload']} moved from {known} to {place}"


def _partition_of(sim: Simulation, key: str) -> int:
    partition: int = sim.module.partition_for(key)
    return partition


async def _poll(sim: Simulation, topic: Topic, group: str) -> list[Any]:
    status, body = await sim.request("POST", f"/{TOPIC}/groups/{group}/poll")
    if status == 0:
        return []  # A crash cut the poll short: its held ranges come back later.
    assert status == 200, (status, body)
    for lease in body:
        topic.delivered[group].update(event["payload"] for event in lease["events"])
    leases: list[Any] = body
    return leases


async def _drain(sim: Simulation, topic: Topic, group: str) -> None:
    """Poll until nothing is left for `group`, letting held leases expire."""
    quiet = 0
    while quiet < 2:
        if await _poll(sim, topic, group):
            quiet = 0
        else:
            quiet += 1
            await sim.advance(LEASE_EXPIRY_MS)
