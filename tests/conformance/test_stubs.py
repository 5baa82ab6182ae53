"""Stubs, ids and env: calls are copied as JSON, errors keep their class, order holds."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from conftest import START_MS, LiveObject, MakeRuntime
from durability.runtime import DurableObject, ObjectId, Runtime


class Boom(Exception):
    """A user error class that must reach the caller as itself."""


class Box(DurableObject):
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.data: dict[str, Any] = {"items": []}
        self.seen: list[int] = []

    async def snapshot(self) -> dict[str, Any]:
        return self.data

    async def add(self, item: Any) -> int:
        self.data["items"].append(item)
        return len(self.data["items"])

    async def fail(self, message: str) -> None:
        raise Boom(message)

    def plain(self, x: int, *, y: int = 0) -> int:
        return x + y

    async def record(self, n: int, pause: bool) -> list[int]:
        self.seen.append(n)
        if pause:
            await asyncio.sleep(0)
        self.seen.append(-n)
        return self.seen

    async def who(self) -> dict[str, Any]:
        return {"id": str(self.ctx.id), "name": self.ctx.id.name, "ext": self.env["EXT"]}

    async def _secret(self) -> None:
        return None

    value = 3


async def test_returned_values_are_copies(make_runtime: MakeRuntime) -> None:
    """Mutating a result or an argument after the call does not touch the object."""
    async with make_runtime(bindings={"BOX": Box}) as rt:
        stub = rt.env.BOX.get_by_name("a")
        item = {"k": [1]}
        await stub.add(item)
        item["k"].append(2)
        snapshot = await stub.snapshot()
        snapshot["items"].append("x")
        assert await stub.snapshot() == {"items": [{"k": [1]}]}


async def test_user_exception_keeps_class_and_message(make_runtime: MakeRuntime) -> None:
    """An exception raised by the method reaches the caller with its class and message."""
    async with make_runtime(bindings={"BOX": Box}) as rt:
        with pytest.raises(Boom, match=r"^bad thing$"):
            await rt.env.BOX.get_by_name("a").fail("bad thing")


async def test_private_unknown_and_non_method_names_raise(make_runtime: MakeRuntime) -> None:
    """Private names, unknown names and non-method attributes raise AttributeError."""
    async with make_runtime(bindings={"BOX": Box}) as rt:
        stub = rt.env.BOX.get_by_name("a")
        for name in ("_secret", "nope", "value", "data", "ctx"):
            with pytest.raises(AttributeError):
                getattr(stub, name)


async def test_non_json_argument_is_rejected_before_delivery(
    make_runtime: MakeRuntime,
) -> None:
    """A non-JSON argument is a TypeError at the call, and the object never sees it."""
    async with make_runtime(bindings={"BOX": Box}) as rt:
        stub = rt.env.BOX.get_by_name("a")
        for bad in ((1, 2), {1: "x"}, float("nan"), {"s": {1, 2}}, b"x"):
            with pytest.raises(TypeError):
                stub.add(bad)
        assert await stub.snapshot() == {"items": []}


async def test_plain_methods_and_keyword_arguments(make_runtime: MakeRuntime) -> None:
    """Plain (non-async) methods work and keyword arguments are passed through."""
    async with make_runtime(bindings={"BOX": Box}) as rt:
        assert await rt.env.BOX.get_by_name("a").plain(2, y=5) == 7


async def test_calls_are_delivered_in_order(make_runtime: MakeRuntime) -> None:
    """Calls start in the order made and interleave only at awaits."""
    async with make_runtime(bindings={"BOX": Box}) as rt:
        stub = rt.env.BOX.get_by_name("a")
        results = await asyncio.gather(
            stub.record(1, True), stub.record(2, False), stub.record(3, True)
        )
        assert results[-1] == [1, 2, -2, 3, -1, -3]


async def test_ids_are_stable_and_env_passes_values(make_runtime: MakeRuntime) -> None:
    """Names map to stable 64-hex ids; non-object bindings pass through as given."""
    service = object()
    async with make_runtime(bindings={"BOX": Box, "EXT": "external"}) as rt:
        namespace = rt.namespace("BOX")
        assert rt.env["BOX"] is namespace and rt.env.EXT == "external"
        first, second = namespace.id_from_name("a"), namespace.id_from_name("a")
        assert first == second and len(str(first)) == 64 and first.name == "a"
        assert namespace.new_unique_id() != namespace.new_unique_id()
        assert namespace.new_unique_id().name is None
        assert namespace.id_from_string(str(first)) == first
        who = await namespace.get(first).who()
        assert who == {"id": str(first), "name": "a", "ext": "external"}
    assert Runtime(bindings={"S": service}).env.S is service


async def test_bad_ids_and_bindings_are_refused(make_runtime: MakeRuntime) -> None:
    """Wrong id types, ids of other namespaces and bad binding names are refused."""
    with pytest.raises(ValueError, match="identifiers"):
        Runtime(bindings={"not valid": Box})
    async with make_runtime(bindings={"BOX": Box, "OTHER": Box}) as rt:
        with pytest.raises(TypeError):
            rt.env.BOX.id_from_name(3)
        with pytest.raises(TypeError):
            rt.env.BOX.get("a" * 64)
        with pytest.raises(ValueError, match="namespace"):
            rt.env.BOX.get(rt.env.OTHER.id_from_name("a"))
        with pytest.raises(ValueError):
            rt.env.BOX.id_from_string("xyz")
        with pytest.raises(KeyError):
            rt.namespace("MISSING")
        with pytest.raises(AttributeError):
            rt.env.MISSING  # noqa: B018
        assert isinstance(rt.env.BOX.id_from_name("a"), ObjectId)


async def test_calls_need_a_running_runtime() -> None:
    """A call before start or after close raises a clear RuntimeError."""
    rt = Runtime(bindings={"BOX": Box})
    with pytest.raises(RuntimeError, match="not running"):
        await rt.env.BOX.get_by_name("a").snapshot()
    async with rt:
        await rt.env.BOX.get_by_name("a").snapshot()
    with pytest.raises(RuntimeError, match="not running"):
        await rt.env.BOX.get_by_name("a").snapshot()


async def test_stub_calls_public_methods_only(live: LiveObject) -> None:
    """Stubs call public methods with JSON copies; other names raise AttributeError."""
    value = {"a": [1, 2.5, None, True, "x"]}
    assert await live.stub.echo(value) == value
    with pytest.raises(KeyError, match="missing"):
        await live.stub.fail()
    for name in ("_hidden", "no_such_method", "probe"):
        with pytest.raises(AttributeError):
            await getattr(live.stub, name)()


async def test_env_namespaces_and_ids(live: LiveObject) -> None:
    """Bindings become namespaces or pass through; ids are stable 64-hex with a name."""
    runtime = live.runtime
    assert runtime.env.PROBE is live.probe
    assert runtime.env["PROBE"] is live.probe
    namespace = runtime.namespace("OBJ")
    object_id = namespace.id_from_name("live")
    assert object_id == runtime.env.OBJ.id_from_name("live")
    assert re.fullmatch("[0-9a-f]{64}", str(object_id))
    assert object_id.name == "live"
    assert str(live.ctx.id) == str(object_id)
    unique = namespace.new_unique_id()
    assert unique.name is None
    assert str(unique) != str(object_id)
    assert await namespace.get(object_id).now() == START_MS


async def test_runtime_without_arguments_is_empty_and_in_memory() -> None:
    """`Runtime()` starts with no bindings and needs no path."""
    async with Runtime() as runtime:
        assert list(runtime.env) == []
