"""Simulated event topics: accepted events reach every group; keys store once.

Producers post small batches (most events keyed; a failed keyed batch is posted again,
as a producer retries, and now and then an acknowledged one is too), two consumer
groups poll, the clock moves and the simulation crashes, evicts and fails the
partitions, some of them between an append, lease or ack and its commit. Checks: a
keyed event keeps the partition and offset it was first given; no group is handed an
event that was never posted; once the faults stop and leases expire, each group's cursor
has passed every record of every partition (each range acked, or parked after its
attempts ran out); a fresh group then reads every accepted event, and every stored
event exactly once.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from durability.testing import (
    Scenario,
    Simulation,
    SimulationRun,
    log_offsets_contiguous,
    nothing_stranded,
)

from ._examples import project

TOPIC = "orders"
GROUPS = ("billing", "search")
KEYS = tuple(f"user-{n}" for n in range(6))
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


async def scenario(run: SimulationRun) -> None:
    topic = Topic()
    for _ in run.steps():
        roll = run.rng.random()
        if roll < 0.25:
            await run.advance(run.rng.randrange(1_000, 120_000))
        elif roll < 0.55:
            await _produce(run, topic, _new_batch(run, topic))
        elif roll < 0.6 and topic.batches:
            await _produce(run, topic, run.rng.choice(topic.batches))
        else:
            await _poll(run, topic, run.rng.choice(GROUPS))
    run.disarm()
    for group in GROUPS:
        await _drain(run, topic, group)
    reply = await run.request("GET", f"/{TOPIC}")
    assert reply.ok and reply.status == 200, reply
    partitions = reply.value
    for group in GROUPS:
        behind = [p for p in partitions if p["cursors"].get(group, 0) != p["next_offset"]]
        assert not behind, f"{group} left records behind: {behind}"
        invented = set(topic.delivered[group]) - topic.accepted - topic.maybe
        assert not invented, f"{group} got events never posted: {sorted(invented)[:5]}"
    await _drain(run, topic, "audit")
    stored = topic.delivered["audit"]
    twice = [payload for payload, count in stored.items() if count > 1]
    assert not twice, f"stored more than once: {twice[:5]}"
    assert topic.accepted <= set(stored) <= topic.accepted | topic.maybe


async def cycle(run: SimulationRun) -> None:
    """Each path once, for exhaustive mode: a keyed append, a poll (lease and ack), a read.
    A poll whose reply was lost may have handled and acked its range: the check is that
    the group's cursor passes the record."""
    topic = Topic()
    batch = [{"partitionKey": "user-0", "payload": "e1", "key": "e1"}]
    await _produce(run, topic, batch)
    await _poll(run, topic, "billing")
    run.disarm()
    await _drain(run, topic, "billing")
    reply = await run.request("GET", f"/{TOPIC}")
    behind = [p for p in reply.value if p["cursors"].get("billing", 0) != p["next_offset"]]
    assert reply.ok and not behind, reply


def _new_batch(run: SimulationRun, topic: Topic) -> list[dict[str, Any]]:
    batch = []
    for _ in range(run.rng.randint(1, 4)):
        topic.sequence += 1
        payload = f"e{topic.sequence}"
        event = {"partitionKey": run.rng.choice(KEYS), "payload": payload}
        if run.rng.random() < 0.7:
            event["key"] = payload
        batch.append(event)
    return batch


async def _produce(run: SimulationRun, topic: Topic, batch: list[dict[str, Any]]) -> None:
    """Post `batch`; a keyed batch that fails is posted again until acknowledged."""
    keyed = all("key" in event for event in batch)
    while True:
        reply = await run.request("POST", f"/{TOPIC}/events", batch)
        if reply.ok or not keyed:
            break
    payloads = [event["payload"] for event in batch]
    if not reply.ok:
        topic.maybe.update(payloads)
        return
    assert reply.status == 202, reply
    body = reply.value
    topic.accepted.update(payloads)
    if keyed and batch not in topic.batches:
        topic.batches.append(batch)
    for partition, result in body.items():
        mine = [e for e in batch if str(_partition_of(run, e["partitionKey"])) == partition]
        for event, offset in zip(mine, result["value"], strict=True):
            if "key" in event:
                place = [int(partition), offset]
                known = topic.offsets.setdefault(event["payload"], place)
                assert known == place, f"{event['payload']} moved from {known} to {place}"


def _partition_of(run: SimulationRun, key: str) -> int:
    partition: int = run.module.partition_for(key)
    return partition


async def _poll(run: SimulationRun, topic: Topic, group: str) -> list[Any]:
    reply = await run.request("POST", f"/{TOPIC}/groups/{group}/poll")
    if not reply.ok:
        return []  # A crash cut the poll short: its held ranges come back later.
    assert reply.status == 200, reply
    body = reply.value
    for lease in body:
        topic.delivered[group].update(event["payload"] for event in lease["events"])
    leases: list[Any] = body
    return leases


async def _drain(run: SimulationRun, topic: Topic, group: str) -> None:
    """Poll until nothing is left for `group`, letting held leases expire."""
    quiet = 0
    while quiet < 2:
        if await _poll(run, topic, group):
            quiet = 0
        else:
            quiet += 1
            await run.advance(LEASE_EXPIRY_MS)


def simulation(scenario: Scenario = scenario, **options: Any) -> Simulation:
    return Simulation(
        project("event_topics"),
        scenario,
        invariants=[log_offsets_contiguous(), nothing_stranded()],
        **options,
    )
