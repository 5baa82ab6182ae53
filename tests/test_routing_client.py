"""RoutingClient: one invoke per push, shard validation, observations, the built-in selector."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import START_MS
from durability import EnqueueResult, LoadSnapshot, RoutingError, SerializedError, now_ms
from durability.routing import (
    MAX_OBSERVATIONS,
    InboundLoad,
    OutboundLoad,
    RoutingAddress,
    RoutingClient,
)
from durability.testing import VirtualClock


def load(
    observed_at: int = START_MS,
    pending: int = 0,
    in_flight: int = 0,
    average: float | None = None,
) -> LoadSnapshot:
    return LoadSnapshot(
        observed_at=observed_at,
        window_ms=60_000,
        inbound=InboundLoad(in_flight, 0, average),
        outbound=OutboundLoad(0, 0, None, pending),
    )


def accepted(snapshot: LoadSnapshot) -> EnqueueResult[str]:
    return EnqueueResult(True, "ok", None, snapshot)


class Recorder:
    """An `invoke` that records each call and answers from a per-shard table."""

    def __init__(self, answer: Any = None) -> None:
        self.calls: list[tuple[RoutingAddress, Any]] = []
        self.answer = answer
        self.pending: dict[str, int] = {}

    async def __call__(self, address: RoutingAddress, input: Any) -> Any:
        self.calls.append((address, input))
        if self.answer is not None:
            return self.answer
        return accepted(load(now_ms(), self.pending.get(address.shard, 0)))


@pytest.fixture
def randoms(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """Scripted values for the selector's two random draws."""
    values: list[float] = []
    monkeypatch.setattr("durability._routing_client.random.random", lambda: values.pop(0))
    yield values


async def test_push_invokes_once_and_returns_the_response_itself() -> None:
    """push calls invoke exactly once with the address and input, and returns its result."""
    result = accepted(load())
    invoke = Recorder(result)
    async with VirtualClock(START_MS):
        client = RoutingClient(invoke=invoke, sharding=lambda i, c, o: "orders")
        assert await client.push({"n": 1}) is result
    assert invoke.calls == [(RoutingAddress("orders"), {"n": 1})]


async def test_rejection_is_returned_unchanged_and_still_observed() -> None:
    """A success=False result comes back as the same object; its load is recorded."""
    rejected: EnqueueResult[None] = EnqueueResult(
        False, None, SerializedError("LogAppendError", "bad"), load(pending=3)
    )
    async with VirtualClock(START_MS):
        client = RoutingClient(invoke=Recorder(rejected), sharding=lambda i, c, o: "a")
        assert await client.push(1) is rejected
        assert client.observations()["a"].outbound.pending_deliveries == 3


async def test_invoke_error_propagates_without_retry_or_record() -> None:
    """An exception from invoke propagates after one call; nothing is observed."""
    calls = 0

    async def invoke(address: RoutingAddress, input: Any) -> Any:
        nonlocal calls
        calls += 1
        raise ConnectionError("transport lost")

    async with VirtualClock(START_MS):
        client = RoutingClient(invoke=invoke)
        with pytest.raises(ConnectionError):
            await client.push(1)
        assert client.observations() == {}
    assert calls == 1


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("s1", RoutingAddress("s1")),
        (RoutingAddress("s2", "weur"), RoutingAddress("s2", "weur")),
        ({"shard": "s3"}, RoutingAddress("s3")),
        ({"shard": "s4", "location_hint": "enam"}, RoutingAddress("s4", "enam")),
        ({"shard": "s5", "locationHint": "apac"}, RoutingAddress("s5", "apac")),
    ],
)
async def test_sharding_targets_normalise_to_an_address(
    target: Any, expected: RoutingAddress
) -> None:
    """A str, a RoutingAddress or a dict (with an optional location hint) names the shard."""
    invoke = Recorder()
    async with VirtualClock(START_MS):
        await RoutingClient(invoke=invoke, sharding=lambda i, c, o: target).push(None)
    assert invoke.calls[0][0] == expected


@pytest.mark.parametrize(
    "target", ["", None, {}, {"shard": ""}, {"shard": 7}, 7, RoutingAddress("")]
)
async def test_bad_shard_raises_before_invoke(target: Any) -> None:
    """A missing, empty or non-string shard raises RoutingError and invokes nothing."""
    invoke = Recorder()
    async with VirtualClock(START_MS):
        client = RoutingClient(invoke=invoke, sharding=lambda i, c, o: target)
        with pytest.raises(RoutingError, match="non-empty shard key"):
            await client.push(1)
    assert invoke.calls == []


async def test_async_sharding_sees_input_context_and_observations() -> None:
    """sharding may be async and receives the input, the caller's context and observations."""
    seen: list[tuple[Any, Any, dict[str, LoadSnapshot]]] = []

    async def sharding(input: Any, context: Any, observed: Any) -> str:
        seen.append((input, context, dict(observed)))
        return f"lane-{context['lane']}"

    invoke = Recorder()
    async with VirtualClock(START_MS):
        client = RoutingClient(invoke=invoke, sharding=sharding)
        await client.push("a", {"lane": "vip"})
        await client.push("b", {"lane": "vip"})
    assert invoke.calls[1][0] == RoutingAddress("lane-vip")
    assert seen[0][:2] == ("a", {"lane": "vip"}) and seen[0][2] == {}
    assert list(seen[1][2]) == ["lane-vip"]


async def test_observations_are_copies() -> None:
    """Changing what observations() returned never changes what routing knows."""
    async with VirtualClock(START_MS):
        client = RoutingClient(invoke=Recorder(), sharding=lambda i, c, o: "a")
        await client.push(1)
        seen = client.observations()
        seen.clear()
        assert list(client.observations()) == ["a"]
        with pytest.raises(dataclasses.FrozenInstanceError):
            client.observations()["a"].outbound.pending_deliveries = 5  # type: ignore[misc]


async def test_json_response_load_is_copied_not_shared() -> None:
    """A JSON result (what a stub returns) is observed from a copy of its load."""
    response = accepted(load(pending=4)).to_json()
    async with VirtualClock(START_MS):
        client = RoutingClient(invoke=Recorder(response), sharding=lambda i, c, o: "a")
        assert await client.push(1) is response
        response["load"]["outbound"]["pendingDeliveries"] = 99
        assert client.observations()["a"].outbound.pending_deliveries == 4


async def test_observations_expire_after_the_window() -> None:
    """An observation is forgotten once its window (60 s) has passed."""
    async with VirtualClock(START_MS) as clock:
        client = RoutingClient(invoke=Recorder(), sharding=lambda i, c, o: "a")
        await client.push(1)
        await clock.advance(59_999)
        assert "a" in client.observations()
        await clock.advance(1)
        assert client.observations() == {}


async def test_older_report_does_not_replace_a_newer_one() -> None:
    """A response observed earlier than the stored one for the shard is ignored."""
    answers = [accepted(load(START_MS + 10, pending=1)), accepted(load(START_MS, pending=2))]

    async def invoke(address: RoutingAddress, input: Any) -> Any:
        return answers.pop(0)

    async with VirtualClock(START_MS + 20):
        client = RoutingClient(invoke=invoke, sharding=lambda i, c, o: "a")
        await client.push(1)
        await client.push(2)
        assert client.observations()["a"].outbound.pending_deliveries == 1


async def test_at_most_1024_shards_are_remembered() -> None:
    """Past 1024 shards the least recently reported one is forgotten."""
    async with VirtualClock(START_MS):
        client = RoutingClient(invoke=Recorder(), sharding=lambda i, c, o: i)
        for index in range(MAX_OBSERVATIONS + 1):
            await client.push(f"s{index}")
        await client.push("s1")
        observed = client.observations()
    assert MAX_OBSERVATIONS == 1024
    assert len(observed) == 1024
    assert "s0" not in observed and "s1" in observed
    assert list(observed)[-1] == "s1"


@pytest.mark.parametrize("limit", [0, -1, 2**53])
def test_soft_backlog_limit_must_be_positive(limit: int) -> None:
    """soft_backlog_limit outside 1..2**53-1 raises ValueError naming it."""
    with pytest.raises(ValueError, match="soft_backlog_limit must be a positive safe integer"):
        RoutingClient(invoke=Recorder(), soft_backlog_limit=limit)


@pytest.mark.parametrize("limit", [1.5, True, "10"])
def test_soft_backlog_limit_must_be_an_int(limit: Any) -> None:
    """A non-integer soft_backlog_limit raises TypeError."""
    with pytest.raises(TypeError, match="soft_backlog_limit"):
        RoutingClient(invoke=Recorder(), soft_backlog_limit=limit)


def test_invoke_and_sharding_must_be_callable() -> None:
    """A non-callable invoke or sharding raises TypeError at construction."""
    with pytest.raises(TypeError, match="invoke"):
        RoutingClient(invoke=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="sharding"):
        RoutingClient(invoke=Recorder(), sharding="a")  # type: ignore[arg-type]


async def test_builtin_selector_starts_on_shard_zero(randoms: list[float]) -> None:
    """With width 1 both candidates are shard-0."""
    randoms.extend([0.9, 0.2])
    invoke = Recorder()
    async with VirtualClock(START_MS):
        await RoutingClient(invoke=invoke).push(1)
    assert invoke.calls[0][0] == RoutingAddress("shard-0")


async def widened(invoke: Recorder, randoms: list[float], limit: int = 10) -> RoutingClient:
    """A client whose width grew to 2 after one push to a backlogged shard-0."""
    invoke.pending["shard-0"] = limit + 1
    client = RoutingClient(invoke=invoke, soft_backlog_limit=limit)
    randoms.extend([0.0, 0.0])
    await client.push("widen")
    return client


async def test_selector_prefers_an_unobserved_candidate(randoms: list[float]) -> None:
    """If a candidate has no observation, the first unobserved candidate is chosen."""
    invoke = Recorder()
    async with VirtualClock(START_MS):
        client = await widened(invoke, randoms)
        randoms.extend([0.0, 0.6])
        await client.push("next")
    assert invoke.calls[-1][0].shard == "shard-1"


async def test_selector_prefers_the_smaller_backlog(randoms: list[float]) -> None:
    """Between two observed candidates the one with fewer pending deliveries wins."""
    invoke = Recorder()
    async with VirtualClock(START_MS):
        client = await widened(invoke, randoms, limit=100)
        invoke.pending["shard-1"] = 5
        randoms.extend([0.6, 0.6])
        await client.push("observe shard-1")
        for draws in ([0.0, 0.6], [0.6, 0.0]):
            randoms.extend(draws)
            await client.push("pick")
            assert invoke.calls[-1][0].shard == "shard-1"


@pytest.mark.parametrize(("in_flight", "chosen"), [(2, "shard-0"), (0, "shard-1")])
async def test_selector_breaks_ties_on_pressure(
    randoms: list[float], in_flight: int, chosen: str
) -> None:
    """Equal backlogs compare in-flight x average time; equal pressure keeps the first."""
    answers = {
        "shard-0": accepted(load(START_MS, pending=101)),
        "shard-1": accepted(load(START_MS, pending=101, in_flight=in_flight, average=50.0)),
    }
    calls: list[str] = []

    async def invoke(address: RoutingAddress, input: Any) -> Any:
        calls.append(address.shard)
        return answers[address.shard]

    async with VirtualClock(START_MS):
        client = RoutingClient(invoke=invoke, soft_backlog_limit=100)
        randoms.extend([0.0, 0.0, 0.6, 0.6, 0.6, 0.0])
        for index in range(3):
            await client.push(index)
    assert calls == ["shard-0", "shard-1", chosen]


async def test_widening_waits_a_second_between_steps(randoms: list[float]) -> None:
    """A backlog over the limit widens by one at most once per second."""
    invoke = Recorder()
    async with VirtualClock(START_MS) as clock:
        client = await widened(invoke, randoms)
        randoms.extend([0.0, 0.0])
        await client.push("too soon")
        randoms.extend([0.99, 0.99])
        await client.push("still two shards")
        assert invoke.calls[-1][0].shard == "shard-1"
        await clock.advance(1_000)
        randoms.extend([0.0, 0.0])
        await client.push("widen again")
        randoms.extend([0.99, 0.99])
        await client.push("three shards")
    assert invoke.calls[-1][0].shard == "shard-2"


async def test_narrowing_needs_a_calm_window(randoms: list[float]) -> None:
    """Width shrinks only a full window after the last widening, on a small idle backlog."""
    invoke = Recorder()
    async with VirtualClock(START_MS) as clock:
        client = await widened(invoke, randoms, limit=100)
        invoke.pending["shard-0"] = 0
        await clock.advance(59_000)
        randoms.extend([0.0, 0.0, 0.99, 0.99])
        await client.push("calm but too soon")
        await client.push("width still 2")
        assert invoke.calls[-1][0].shard == "shard-1"
        await clock.advance(1_000)
        randoms.extend([0.0, 0.0, 0.99, 0.99])
        await client.push("calm for a window: narrow")
        await client.push("width 1")
    assert invoke.calls[-1][0].shard == "shard-0"


async def test_stale_report_never_resizes(randoms: list[float]) -> None:
    """A response whose load is older than the window does not widen the client."""
    fresh = Recorder()
    answers = [accepted(load(START_MS - 60_000, pending=10_000))]

    async def invoke(address: RoutingAddress, input: Any) -> Any:
        return answers.pop() if answers else await fresh(address, input)

    async with VirtualClock(START_MS):
        client = RoutingClient(invoke=invoke, soft_backlog_limit=10)
        randoms.extend([0.0, 0.0, 0.99, 0.99])
        await client.push(1)
        await client.push(2)
    assert fresh.calls[0][0].shard == "shard-0"
