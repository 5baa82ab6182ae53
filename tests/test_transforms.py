"""Call transforms: definitions, caller stubs, callee chains and context over the runtime."""

from __future__ import annotations

from typing import Any

import pytest

from conftest import MakeRuntime
from durability import DurabilityError
from durability.runtime import DurableObject
from durability.transforms import (
    CalleeCall,
    CallerCall,
    CallerTimeoutError,
    Transform,
    apply_transforms,
    create_transform_context_target,
    create_transform_stub,
    define_transform,
    register_transform,
    with_transforms,
)

LOG: list[Any] = []


def tag(label: str) -> Transform:
    """A transform that logs its label on both sides and adds it to the context."""

    def caller(options: Any) -> Any:
        async def handler(call: CallerCall) -> Any:
            LOG.append(("caller", label, call.method, dict(call.context)))
            return await call.next(context={label: options})

        return handler

    def callee(options: Any) -> Any:
        async def handler(call: CalleeCall) -> Any:
            LOG.append(("callee", label, call.method, dict(call.context)))
            return await call.next()

        return handler

    return define_transform().caller(caller).callee(callee)


OUTER, INNER, ONLY_ADD = tag("outer"), tag("inner"), tag("add")


def recording_callee(options: Any) -> Any:
    async def handler(call: CalleeCall) -> Any:
        LOG.append(("seen", call.method, dict(call.context), call.args, str(call.state.id.name)))
        assert call.instance.env is call.env
        return await call.next()

    return handler


RECORDING = define_transform().callee(recording_callee)


class Base(DurableObject):
    async def add(self, n: int) -> int:
        total: int = (await self.ctx.storage.get("total") or 0) + n
        await self.ctx.storage.put("total", total)
        return total

    async def echo(self, value: Any) -> Any:
        return value

    async def alarm(self, info: Any = None) -> None:
        LOG.append("alarm")

    def plain(self) -> str:
        return "plain"


class Counter(Base):
    async def ping(self) -> str:
        return "pong"


apply_transforms(Base, all=[OUTER], methods={"add": [register_transform(ONLY_ADD, "x")]})
apply_transforms(Counter, all=[INNER, RECORDING])


@pytest.fixture(autouse=True)
def clear_log() -> None:
    LOG.clear()


async def test_definition_sides_chain_in_either_order() -> None:
    """caller() and callee() can be chained in any order; the definition is a do-transform."""

    def side(options: Any) -> Any:
        return lambda call: call.next()

    both = define_transform().callee(side).caller(side)
    assert both.caller_factory is side and both.callee_factory is side  # type: ignore[comparison-overlap]
    assert both.type == "do-transform"
    assert define_transform().caller_factory is None


def test_with_needs_a_caller_side_returning_a_function() -> None:
    """with_() rejects a callee-only transform and a factory that returns no function."""
    stub = create_transform_stub(object())
    with pytest.raises(TypeError, match="Transform does not define a caller"):
        stub.with_(RECORDING)
    broken = define_transform().caller(lambda options: 42)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="Caller transform factory must return a function"):
        stub.with_(broken)


def test_register_needs_a_callee_side() -> None:
    """register_transform() rejects a transform without a callee side."""
    caller_only = define_transform().caller(lambda options: lambda call: call.next())
    with pytest.raises(TypeError, match="Transform does not define a callee"):
        register_transform(caller_only)


async def test_caller_transforms_run_in_attach_order_and_leave_the_original() -> None:
    """with_() returns a new stub; calls run its transforms in the order attached."""

    class Target:
        def __init__(self) -> None:
            self.limit = 3

        async def echo_me(self, value: str) -> str:
            raise AssertionError("context goes through set_context")

        async def set_context(self, context: Any, method: str, args: list[Any]) -> Any:
            return (context, method, args)

    plain = create_transform_stub(Target())
    chained = plain.with_(OUTER, 1).with_(INNER, 2)
    assert await chained.echo_me("a") == ({"outer": 1, "inner": 2}, "echo_me", ["a"])
    assert [entry[1] for entry in LOG] == ["outer", "inner"]
    assert LOG[1][3] == {"outer": 1}
    assert plain.limit == 3


async def test_empty_context_calls_the_method_directly() -> None:
    """A chain that adds no context calls the target's method with its arguments."""

    class Target:
        def double(self, n: int, *, times: int = 2) -> int:
            return n * times

    passthrough = define_transform().caller(lambda options: lambda call: call.next())
    stub = create_transform_stub(Target(), [(passthrough, None)])
    assert await stub.double(4) == 8
    assert await stub.double(4, times=3) == 12


async def test_context_needs_a_target_with_set_context() -> None:
    """A call carrying context to a target without set_context raises TypeError."""

    class Target:
        async def go(self) -> None:
            raise AssertionError("never called")

    with pytest.raises(TypeError, match="without set_context"):
        await create_transform_stub(Target()).with_(OUTER, 1).go()


async def test_next_can_replace_the_arguments() -> None:
    """A caller handler may pass new arguments down the chain."""

    class Target:
        async def show(self, value: str) -> str:
            return value

    upper = define_transform().caller(
        lambda options: lambda call: call.next(args=[call.args[0].upper()])
    )
    assert await create_transform_stub(Target()).with_(upper).show("hi") == "HI"


async def test_context_reaches_the_callee_chain_over_the_runtime(make_runtime: MakeRuntime) -> None:
    """Caller context travels through set_context; base transforms run outermost, all first."""
    async with make_runtime(bindings={"COUNTERS": Counter}) as rt:
        stub = create_transform_stub(rt.env.COUNTERS.get_by_name("c1"))
        assert await stub.with_(OUTER, "req-1").add(2) == 2
    assert LOG == [
        ("caller", "outer", "add", {}),
        ("callee", "outer", "add", {"outer": "req-1"}),
        ("callee", "add", "add", {"outer": "req-1"}),
        ("callee", "inner", "add", {"outer": "req-1"}),
        ("seen", "add", {"outer": "req-1"}, (2,), "c1"),
    ]


async def test_plain_calls_still_run_callee_transforms(make_runtime: MakeRuntime) -> None:
    """A call without transform context runs the callee chain with an empty context."""
    async with make_runtime(bindings={"COUNTERS": Counter}) as rt:
        assert await rt.env.COUNTERS.get_by_name("c2").ping() == "pong"
    assert [entry[:3] for entry in LOG] == [
        ("callee", "outer", "ping"),
        ("callee", "inner", "ping"),
        ("seen", "ping", {}),
    ]


async def test_reserved_sync_and_private_methods_are_not_wrapped(make_runtime: MakeRuntime) -> None:
    """alarm, plain (sync) methods and set_context are left as they are."""
    async with make_runtime(bindings={"COUNTERS": Counter}) as rt:
        stub = rt.env.COUNTERS.get_by_name("c3")
        assert await stub.plain() == "plain"
    assert LOG == []
    assert not hasattr(Counter.alarm, "__durability_original__")
    assert not hasattr(Counter.plain, "__durability_original__")


def test_unknown_method_is_rejected() -> None:
    """Naming a method the class does not have (or cannot wrap) raises TypeError."""

    class Small(DurableObject):
        async def go(self) -> None: ...

    with pytest.raises(TypeError, match="Cannot apply transforms to unknown method nope"):
        apply_transforms(Small, methods={"nope": [RECORDING]})
    with pytest.raises(TypeError, match="unknown method alarm"):
        apply_transforms(Small, methods={"alarm": [RECORDING]})


async def test_apply_is_cumulative() -> None:
    """Applying again adds transforms after the ones already installed."""

    class Twice(DurableObject):
        async def go(self) -> str:
            return "went"

    apply_transforms(Twice, all=[OUTER])
    apply_transforms(Twice, all=[INNER])
    target = create_transform_context_target(Twice(None, None), {"k": 1})  # type: ignore[arg-type]
    assert await target.invoke("go", []) == "went"
    assert [entry[1] for entry in LOG] == ["outer", "inner"]
    assert LOG[0][3] == {"k": 1}


async def test_context_target_refuses_reserved_and_unknown_methods() -> None:
    """invoke() of a reserved or missing method raises TypeError."""
    target = create_transform_context_target(Counter(None, None), {})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Cannot dispatch reserved method alarm"):
        await target.invoke("alarm", [])
    with pytest.raises(TypeError, match="Unable to dispatch missing"):
        await target.invoke("missing", [])
    with pytest.raises(TypeError, match="Unable to dispatch _secret"):
        await target.invoke("_secret", [])


async def test_with_transforms_wraps_namespace_stubs(make_runtime: MakeRuntime) -> None:
    """with_transforms(namespace).get_by_name() gives transform stubs; other members pass."""
    async with make_runtime(bindings={"COUNTERS": Counter}) as rt:
        namespace = with_transforms(rt.env.COUNTERS)
        assert namespace.name == "COUNTERS"
        stub = namespace.get_by_name("c4").with_(OUTER, "r")
        assert await stub.echo({"a": 1}) == {"a": 1}
    assert ("callee", "outer", "echo", {"outer": "r"}) in LOG


async def test_caller_timeout_error_is_a_durability_and_timeout_error() -> None:
    """CallerTimeoutError names the method and the limit, and is a TimeoutError."""
    error = CallerTimeoutError("append", 5000)
    assert isinstance(error, DurabilityError) and isinstance(error, TimeoutError)
    assert str(error) == "RPC call to append timed out after 5000ms"
    assert (error.method, error.timeout_ms) == ("append", 5000)


async def test_next_takes_the_upstream_mapping_form() -> None:
    """call.next({"context": ..., "args": ...}) works like the keywords; mixing raises."""

    class Target:
        async def set_context(self, context: Any, method: str, args: list[Any]) -> Any:
            return context, args

        async def show(self, value: str) -> str:
            raise AssertionError("context goes through set_context")

    mapping = define_transform().caller(
        lambda options: lambda call: call.next({"context": {"lane": options}, "args": ["b"]})
    )
    both = define_transform().caller(
        lambda options: lambda call: call.next({"context": {}}, context={})
    )
    stub = create_transform_stub(Target())
    assert await stub.with_(mapping, "vip").show("a") == ({"lane": "vip"}, ["b"])
    with pytest.raises(TypeError, match="a mapping or keywords, not both"):
        await stub.with_(both).show("a")


async def test_apply_accepts_transform_and_options_pairs() -> None:
    """apply_transforms lists take (transform, options) pairs as well as registrations."""
    seen: list[Any] = []

    def callee(options: Any) -> Any:
        async def handler(call: CalleeCall) -> Any:
            seen.append(options)
            return await call.next()

        return handler

    class Paired(DurableObject):
        async def go(self) -> str:
            return "went"

    apply_transforms(Paired, all=[(define_transform().callee(callee), "opt")])
    assert await Paired(None, None).go() == "went"  # type: ignore[arg-type]
    assert seen == ["opt"]
