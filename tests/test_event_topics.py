"""The event topics example, driven through its fetch handler on a virtual clock."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from durability.runtime import Request, Runtime
from durability.runtime.server import WorkerModule, load_worker
from durability.testing import VirtualClock

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "event_topics"
HOUR_MS = 60 * 60 * 1000


@dataclass
class Topics:
    """The example served by a file-backed runtime on a virtual clock."""

    worker: WorkerModule
    rt: Runtime
    clock: VirtualClock
    module: Any

    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        text = "" if body is None else json.dumps(body)
        response = await self.worker.fetch(
            Request(f"http://topics{path}", method=method, body=text), self.rt.env
        )
        raw = response.body.decode()
        is_json = response.headers.get("content-type") == "application/json"
        return response.status, json.loads(raw) if is_json else raw

    async def produce(self, events: list[dict[str, Any]]) -> Any:
        status, body = await self.request("POST", "/orders/events", events)
        assert status == 202, body
        return body

    async def poll(self, group: str, fail: str | None = None) -> list[Any]:
        suffix = "" if fail is None else f"?fail={fail}"
        status, body = await self.request("POST", f"/orders/groups/{group}/poll{suffix}")
        assert status == 200
        assert isinstance(body, list)
        return body

    async def status(self) -> list[Any]:
        status, body = await self.request("GET", "/orders")
        assert status == 200
        assert isinstance(body, list)
        return body


@pytest.fixture
async def topics(tmp_path: Path) -> AsyncIterator[Topics]:
    worker = load_worker(str(EXAMPLE))
    module = sys.modules[worker.name]
    bindings = {**worker.bindings, "SEGMENTS_DIR": str(tmp_path / "segments")}
    clock = VirtualClock()
    async with Runtime(path=str(tmp_path / "db"), bindings=bindings, clock=clock) as rt:
        yield Topics(worker, rt, clock, module)


def events(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"partitionKey": key, "payload": payload} for key, payload in pairs]


def payloads(handled: list[Any]) -> list[str]:
    return [event["payload"] for lease in handled for event in lease["events"]]


async def test_a_group_handles_each_event_once_in_key_order(topics: Topics) -> None:
    """Every produced event is handled once per group, in order per partition key."""
    produced = [(f"user-{n % 5}", f"e{n}") for n in range(20)]
    accepted = await topics.produce(events(*produced))
    first = await topics.poll("billing")
    again = await topics.poll("billing")
    other = await topics.poll("search")
    assert all(result["accepted"] for result in accepted.values())
    assert sorted(payloads(first)) == sorted(p for _, p in produced)
    for key in {k for k, _ in produced}:
        partition = topics.module.partition_for(key)
        [lease] = [lease for lease in first if lease["partition"] == partition]
        mine = [e["payload"] for e in lease["events"] if e["partitionKey"] == key]
        assert mine == [p for k, p in produced if k == key]
    assert again == []
    assert sorted(payloads(other)) == sorted(p for _, p in produced)
    backlog = [partition["backlog"] for partition in await topics.status()]
    assert backlog == [0] * topics.module.PARTITIONS


async def test_keys_deduplicate_producer_retries(topics: Topics) -> None:
    """Re-posting an event with the same key returns its original offset."""
    event = [{"partitionKey": "alice", "payload": "paid", "key": "evt-1"}]
    first = await topics.produce(event)
    retry = await topics.produce(event)
    assert first == retry
    assert sum(p["next_offset"] for p in await topics.status()) == 1


async def test_failing_range_is_redelivered_then_parked(topics: Topics) -> None:
    """A range that keeps failing is nacked, redelivered, and parked after five attempts."""
    await topics.produce(events(("alice", "poison")))
    for _ in range(topics.module.MAX_ATTEMPTS):
        assert await topics.poll("billing", fail="poison") == []
    assert await topics.poll("billing") == []
    await topics.produce(events(("alice", "fine")))
    handled = await topics.poll("billing")
    partition = topics.module.partition_for("alice")
    state = (await topics.status())[partition]
    assert payloads(handled) == ["fine"]
    assert [p["events"][0]["payload"] for p in state["parked"]] == ["poison"]
    assert state["cursors"] == {"billing": 2}


async def test_retention_alarm_flushes_and_a_new_group_reads_cold(topics: Topics) -> None:
    """The hourly sweep trims records older than a day; they stay readable from segments."""
    await topics.produce(events(("alice", "old-1"), ("alice", "old-2")))
    await topics.clock.advance(25 * HOUR_MS)
    partition = topics.module.partition_for("alice")
    state = (await topics.status())[partition]
    handled = await topics.poll("late-group")
    assert (state["oldest_offset"], state["hot_offset"], state["next_offset"]) == (0, 2, 2)
    assert payloads(handled) == ["old-1", "old-2"]


async def test_bad_requests(topics: Topics) -> None:
    """Malformed events answer 400; unknown routes answer 404 with the usage."""
    assert (await topics.request("POST", "/orders/events", {"not": "a list"}))[0] == 400
    assert (await topics.request("POST", "/orders/events", [{"payload": 1}]))[0] == 400
    status, body = await topics.request("GET", "/orders/groups")
    assert status == 404
    assert "POST /TOPIC/events" in body
