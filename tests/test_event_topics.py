"""The event topics example, driven through its fetch handler on a virtual clock."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import MakeRuntime
from durability.runtime import Request, Runtime
from durability.runtime.server import WorkerModule, load_worker
from durability.testing import VirtualClock

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "event_topics"
DAY_MS = 24 * 60 * 60 * 1000


@dataclass
class Topics:
    """The example served by a file-backed runtime on a virtual clock."""

    worker: WorkerModule
    rt: Runtime
    clock: VirtualClock
    module: Any

    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        text = None if body is None else json.dumps(body)
        response = await self.worker.fetch(
            Request(f"http://topics{path}", method=method, body=text), self.rt.env
        )
        raw = await response.text()
        is_json = response.headers.get("content-type") == "application/json"
        return response.status, json.loads(raw) if is_json else raw

    async def produce(self, events: list[dict[str, Any]], query: str = "") -> Any:
        status, body = await self.request("POST", f"/orders/events{query}", events)
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
async def topics(
    tmp_path: Path, make_runtime: MakeRuntime, clock: VirtualClock
) -> AsyncIterator[Topics]:
    worker = load_worker(str(EXAMPLE))
    module = sys.modules[worker.name]
    bindings = {**worker.bindings, "SEGMENTS_DIR": str(tmp_path / "segments")}
    async with make_runtime(path=str(tmp_path / "db"), bindings=bindings) as rt:
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
    assert all(result["success"] for result in accepted.values())
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
    assert [r["value"] for r in first.values()] == [r["value"] for r in retry.values()] == [[0]]
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


async def test_retention_alarm_flushes_and_a_new_group_reads_cold(
    topics: Topics, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep trims records older than seven days; they stay readable from segments."""
    # Sweeping daily rather than every minute: the same trims, 8 passes instead of 10,000.
    monkeypatch.setattr(topics.module, "RETENTION_SWEEP_MS", DAY_MS)
    await topics.produce(events(("alice", "old-1"), ("alice", "old-2")))
    await topics.clock.advance(8 * DAY_MS + 60_000)
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


async def test_a_wrong_method_answers_405_with_the_allowed_one(topics: Topics) -> None:
    """A known route asked with the wrong method answers 405 and names the right one."""
    for method, path, allowed in [
        ("GET", "/orders/events", "POST"),
        ("GET", "/orders/groups/billing/poll", "POST"),
        ("POST", "/orders", "GET"),
    ]:
        response = await topics.worker.fetch(
            Request(f"http://topics{path}", method=method), topics.rt.env
        )
        assert (response.status, response.headers.get("allow")) == (405, allowed), path
        assert await response.text() == f"{method} is not allowed here: use {allowed}\n"


def test_partition_for_is_the_fnv_1a_of_the_typescript_original() -> None:
    """Keys hash to the partitions the original's FNV-1a (UTF-16, signed 32-bit) gives."""
    expected = {"alice": 1, "bob": 4, "user-2": 3, "user-3": 6, "z": 3, "\U0001f600x": 0, "é": 4}
    module = load_worker(str(EXAMPLE))
    partition_for = sys.modules[module.name].partition_for
    assert {key: partition_for(key) for key in expected} == expected


async def test_each_push_lands_on_its_key_partition_and_reports_load(topics: Topics) -> None:
    """A batch goes to `topic:partition_for(key)`; its result carries that partition's load,
    which the producer's routing client remembers by shard."""
    accepted = await topics.produce(events(("alice", "a"), ("bob", "b")), "?region=weur")
    alice, bob = topics.module.partition_for("alice"), topics.module.partition_for("bob")
    observed = topics.module.topics.observations()
    assert {number: result["value"] for number, result in accepted.items()} == {
        str(alice): [0],
        str(bob): [0],
    }
    assert all(result["load"]["outbound"]["pendingDeliveries"] == 0 for result in accepted.values())
    assert sorted(observed) == sorted([f"orders:{alice}", f"orders:{bob}"])


async def test_a_lagging_partition_turns_producers_away_until_its_load_window_passes(
    topics: Topics, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over MAX_BACKLOG behind, a partition gets no push (429, nothing appended) while the
    backlog it reported is current; other partitions still accept, and once the window
    has passed the next push goes through and reports afresh."""
    monkeypatch.setattr(topics.module, "MAX_BACKLOG", 2)
    await topics.produce(events(("alice", "a0")))
    await topics.poll("billing")
    lagging = await topics.produce(events(("alice", "a1"), ("alice", "a2"), ("alice", "a3")))
    status, refused = await topics.request("POST", "/orders/events", events(("alice", "a4")))
    await topics.produce(events(("bob", "b0")))
    await topics.poll("billing")
    still, _ = await topics.request("POST", "/orders/events", events(("alice", "a5")))
    await topics.clock.advance(60_000)
    accepted = await topics.produce(events(("alice", "a6")))
    partition = str(topics.module.partition_for("alice"))
    state = (await topics.status())[int(partition)]
    assert lagging[partition]["load"]["outbound"]["pendingDeliveries"] == 3
    assert (status, refused) == (429, {"error": "consumers are behind", "backlog": {partition: 3}})
    assert still == 429
    assert accepted[partition]["value"] == [4]
    assert accepted[partition]["load"]["outbound"]["pendingDeliveries"] == 1
    assert state["next_offset"] == 5
