"""DurabilityRouting: the load observer in objects and the client over a namespace."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from conftest import MakeRuntime
from durability import (
    DurabilityLog,
    DurabilityScheduler,
    EnqueueResult,
    LogAppendInput,
    RoutingError,
    RoutingLoad,
)
from durability.routing import DurabilityRouting, RoutingAddress
from durability.runtime import DurableObject
from durability.testing import VirtualClock
from durability.transforms import CallerTimeoutError, define_transform, timeout


class Partition(DurableObject):
    """A log partition whose appends report the load routing weighs."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.routing = DurabilityRouting()
        self.log: DurabilityLog[Any] = DurabilityLog(
            scheduler=DurabilityScheduler(context=ctx), routing=self.routing
        )

    async def append(self, bodies: list[Any]) -> dict[str, Any]:
        result = await self.log.append([LogAppendInput(body) for body in bodies])
        return result.to_json()

    async def slow_append(self, bodies: list[Any]) -> dict[str, Any]:
        await asyncio.sleep(10)
        return await self.append(bodies)

    async def follow(self, group: str) -> None:
        await self.log.commit(group, 0)

    async def records(self) -> list[Any]:
        page = await self.log.read(0)
        return [record.body for record in page.records]


def by_key(input: Any, context: Any, observations: Any) -> Any:
    lane = (context or {}).get("lane")
    return lane or f"key-{input[0]['key']}"


def append(stub: Any, input: Any) -> Any:
    return stub.append(input)


def test_durability_routing_is_a_routing_load() -> None:
    """DurabilityRouting() is the RoutingLoad a capability takes as routing=."""
    assert isinstance(DurabilityRouting(), RoutingLoad)


async def test_push_reaches_the_shard_and_learns_its_backlog(make_runtime: MakeRuntime) -> None:
    """A push appends on the chosen object; its load (a group's backlog) is observed."""
    async with make_runtime(bindings={"PARTITIONS": Partition}) as rt:
        client = DurabilityRouting.client(
            namespace=lambda: rt.env.PARTITIONS, invoke=append, sharding=by_key
        )
        await rt.env.PARTITIONS.get_by_name("key-a").follow("search")
        result = await client.push([{"key": "a", "n": 1}])
        await client.push([{"key": "a", "n": 2}, {"key": "a", "n": 3}])
        assert EnqueueResult.from_json(result).value == [0]
        stub = rt.env.PARTITIONS.get_by_name("key-a")
        assert [body["n"] for body in await stub.records()] == [1, 2, 3]
        observed = client.observations()
        assert list(observed) == ["key-a"]
        assert observed["key-a"].outbound.pending_deliveries == 3


async def test_builtin_selector_creates_shards_on_demand(make_runtime: MakeRuntime) -> None:
    """Without sharding the first push goes to shard-0 of the namespace."""
    async with make_runtime(bindings={"PARTITIONS": Partition}) as rt:
        client = DurabilityRouting.client(namespace=lambda: rt.env.PARTITIONS, invoke=append)
        await client.push(["x"])
        assert await rt.env.PARTITIONS.get_by_name("shard-0").records() == ["x"]


async def test_namespace_is_resolved_on_every_push(make_runtime: MakeRuntime) -> None:
    """The namespace callable runs per push, so it can read an env that arrives later."""
    current: dict[str, Any] = {}
    calls = 0

    def namespace() -> Any:
        nonlocal calls
        calls += 1
        return current["env"].PARTITIONS

    client = DurabilityRouting.client(namespace=namespace, invoke=append, sharding=by_key)
    async with make_runtime(bindings={"PARTITIONS": Partition}) as rt:
        current["env"] = rt.env
        await client.push([{"key": "b"}])
        await client.push([{"key": "b"}])
    assert calls == 2


async def test_export_name_is_looked_up_in_env(make_runtime: MakeRuntime) -> None:
    """export_name names the binding in env (an object or a callable returning one)."""
    async with make_runtime(bindings={"PARTITIONS": Partition}) as rt:
        for env in (rt.env, lambda: rt.env):
            client = DurabilityRouting.client(
                export_name="PARTITIONS", env=env, invoke=append, sharding=by_key
            )
            await client.push([{"key": "c"}])
        assert len(await rt.env.PARTITIONS.get_by_name("key-c").records()) == 2


async def test_unresolvable_namespace_raises_routing_error() -> None:
    """No namespace, or an export that is not a namespace, raises RoutingError at push."""
    invoked: list[Any] = []
    missing = DurabilityRouting.client(invoke=lambda stub, i: invoked.append(i))
    with pytest.raises(RoutingError, match="explicit namespace"):
        await missing.push(1)
    wrong = DurabilityRouting.client(
        export_name="QUEUE", env={"QUEUE": "not a namespace"}, invoke=lambda s, i: None
    )
    with pytest.raises(RoutingError, match='Export "QUEUE" is not a Durable Object namespace'):
        await wrong.push(1)
    assert invoked == []


async def test_bad_shard_invokes_nothing() -> None:
    """An empty shard from sharding raises RoutingError before any stub is fetched."""
    fetched: list[str] = []

    class Namespace:
        def get_by_name(self, name: str) -> Any:
            fetched.append(name)

    client = DurabilityRouting.client(
        namespace=Namespace, invoke=lambda s, i: None, sharding=lambda i, c, o: ""
    )
    with pytest.raises(RoutingError):
        await client.push(1)
    assert fetched == []


async def test_location_hint_is_passed_to_get_by_name_on_cloudflare() -> None:
    """A Cloudflare-shaped namespace gets getByName(shard, {"locationHint": hint})."""
    seen: list[tuple[Any, ...]] = []

    class CloudflareNamespace:
        def getByName(self, *args: Any) -> Any:
            seen.append(args)
            return "stub"

    def sharding(input: Any, context: Any, observations: Any) -> Any:
        return RoutingAddress("eu-1", "weur") if input == "eu" else {"shard": "us-1"}

    client = DurabilityRouting.client(
        namespace=CloudflareNamespace, invoke=lambda stub, i: stub, sharding=sharding
    )
    assert await client.push("eu") == "stub"
    await client.push("us")
    assert seen == [("eu-1", {"locationHint": "weur"}), ("us-1",)]


async def test_transform_context_reaches_sharding(make_runtime: MakeRuntime) -> None:
    """Context added by a caller transform is merged over the positional context."""
    lane = define_transform().caller(
        lambda options: lambda call: call.next(context={"lane": options})
    )
    seen: list[Any] = []

    def sharding(input: Any, context: Any, observations: Any) -> str:
        seen.append(context)
        return str(context["lane"])

    async with make_runtime(bindings={"PARTITIONS": Partition}) as rt:
        client = DurabilityRouting.client(
            namespace=lambda: rt.env.PARTITIONS, invoke=append, sharding=sharding
        )
        await client.with_(lane, "vip").push(["v"], {"lane": "slow", "region": "eu"})
        await client.with_(lane, "vip").push(["w"])
        assert await rt.env.PARTITIONS.get_by_name("vip").records() == ["v", "w"]
    assert seen == [{"lane": "vip", "region": "eu"}, {"lane": "vip"}]


async def test_context_pushes_check_method_and_context_type() -> None:
    """Only push can be routed with context, and a positional context must be a mapping."""
    lane = define_transform().caller(lambda options: lambda call: call.next(context={"l": 1}))
    client = DurabilityRouting.client(namespace=lambda: None, invoke=lambda s, i: None)
    with pytest.raises(TypeError, match="Routing context must be a mapping"):
        await client.with_(lane).push(1, ["not", "a", "mapping"])
    with pytest.raises(RoutingError, match='Unknown routing method "observations"'):
        await client.with_(lane).observations()


async def test_timeout_transform_bounds_a_push(
    make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """client.with_(timeout, ms).push raises CallerTimeoutError; the append still lands."""
    async with make_runtime(bindings={"PARTITIONS": Partition}) as rt:
        client = DurabilityRouting.client(
            namespace=lambda: rt.env.PARTITIONS,
            invoke=lambda stub, input: stub.slow_append(input),
            sharding=lambda i, c, o: "p",
        )
        call = asyncio.ensure_future(client.with_(timeout, 5_000).push(["late"]))
        await clock.advance(5_000)
        with pytest.raises(CallerTimeoutError, match="RPC call to push timed out after 5000ms"):
            await call
        assert client.observations() == {}
        await clock.advance(5_000)
        assert await rt.env.PARTITIONS.get_by_name("p").records() == ["late"]


async def test_routing_never_retries_a_failed_push() -> None:
    """An invoke that raises is called once; the error reaches the caller."""
    calls: list[Any] = []

    async def invoke(stub: Any, input: Any) -> Any:
        calls.append(input)
        raise ConnectionError("lost")

    class Namespace:
        def get_by_name(self, name: str) -> str:
            return name

    client = DurabilityRouting.client(namespace=Namespace, invoke=invoke)
    with pytest.raises(ConnectionError):
        await client.push("once")
    assert calls == ["once"]


def test_client_options_are_checked() -> None:
    """invoke and namespace must be callable; soft_backlog_limit is checked as for the client."""
    with pytest.raises(TypeError, match="invoke"):
        DurabilityRouting.client(invoke=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="namespace"):
        DurabilityRouting.client(namespace="NS", invoke=append)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="soft_backlog_limit"):
        DurabilityRouting.client(invoke=append, soft_backlog_limit=0)
