"""Bad input at the edges: hostile nesting and values Cloudflare would refuse.

Each rejection is a clear exception naming the field and the rule, raised before
anything is stored, on the embedded runtime as on Cloudflare.
"""

from __future__ import annotations

from typing import Any

import pytest

from conftest import MakeRuntime
from durability import (
    Durability,
    DurabilityFanout,
    DurabilityLog,
    DurableCall,
    LogAppendInput,
    LogLeaseOptions,
    LogRetention,
    RetryPolicy,
)
from durability.routing import RoutingClient
from durability.runtime import DurableObject
from durability.testing import VirtualClock

MB2 = 2_000_000


def nested(depth: int) -> Any:
    """A list nested `depth` levels deep."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


class Target(DurableObject):
    """KV, a durable operation whose result is as large as its payload asks, and a log."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.durability = Durability(context=ctx, handlers={"echo": self._echo})
        self.log: DurabilityLog[Any] = DurabilityLog(context=ctx)

    async def _echo(self, call: DurableCall) -> Any:
        return "x" * int(call.payload["size"])

    async def put_deep(self, depth: int) -> None:
        await self.ctx.storage.put("k", nested(depth))

    async def put_sized(self, size: int) -> None:
        await self.ctx.storage.put("k", "x" * size)

    async def keys(self) -> list[str]:
        return list(await self.ctx.storage.list())

    async def register_deep(self, id: str, depth: int) -> None:
        await self.durability.operation("echo")(id=id, payload=nested(depth))

    async def register(self, id: str, payload: Any) -> None:
        await self.durability.operation("echo")(id=id, payload=payload)

    async def register_sized(self, id: str, size: int) -> None:
        await self.durability.operation("echo")(id=id, payload={"pad": "x" * size, "size": 1})

    async def outcome(self, id: str) -> Any:
        result = await self.durability.operation("echo").get_result(id)
        return [result.status, None if result.error is None else result.error.name]

    async def append_deep(self, depth: int) -> Any:
        await self.log.append(LogAppendInput(nested(depth)))

    async def append_sized(self, size: int) -> Any:
        await self.log.append(LogAppendInput("x" * size))

    async def next_offset(self) -> int:
        return (await self.log.bounds()).next_offset

    async def echo(self, value: Any) -> Any:
        return value

    async def deep(self, depth: int) -> Any:
        return nested(depth)


@pytest.fixture
async def target(make_runtime: MakeRuntime, clock: VirtualClock) -> Any:
    async with make_runtime(bindings={"T": Target}) as rt:
        yield rt.env.T.get_by_name("t"), clock


async def test_deep_nesting_is_a_type_error_everywhere(target: Any) -> None:
    """A list nested 5,000 deep raises TypeError naming the depth rule, never RecursionError."""
    stub, _ = target
    for call in (
        stub.put_deep(5_000),
        stub.register_deep("a", 5_000),
        stub.append_deep(5_000),
        stub.deep(5_000),
    ):
        with pytest.raises(TypeError, match="levels deep"):
            await call
    with pytest.raises(TypeError, match="arguments nests lists and dicts more than"):
        stub.echo(nested(5_000))
    assert await stub.keys() == []
    assert await stub.outcome("a") == ["not_found", None]
    assert await stub.next_offset() == 0
    assert await stub.echo(nested(100)) == nested(100)


async def test_values_over_2_mb_are_refused(target: Any) -> None:
    """KV values, payloads and log bodies over 2 MB raise ValueError and store nothing."""
    stub, _ = target
    for call in (
        stub.put_sized(MB2),
        stub.register_sized("big", MB2),
        stub.append_sized(MB2),
    ):
        with pytest.raises(ValueError, match="2,000,000 bytes"):
            await call
    assert await stub.keys() == []
    assert await stub.outcome("big") == ["not_found", None]
    assert await stub.next_offset() == 0
    await stub.put_sized(MB2 - 100)
    assert await stub.keys() == ["k"]


async def test_a_result_over_2_mb_fails_the_call(target: Any) -> None:
    """A handler result over 2 MB fails its call for good, with the size rule as the cause."""
    stub, clock = target
    await stub.register("r", {"size": MB2})
    await clock.advance(1_000)
    status, error = await stub.outcome("r")
    assert status == "failed"
    assert error == "DurableResultSerializationError"


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: DurabilityLog(max_batch_size=1.5), "max_batch_size must be a positive integer"),  # type: ignore[arg-type]
        (lambda: LogRetention(max_bytes=1.5), "max_bytes must be a positive integer"),  # type: ignore[arg-type]
        (lambda: LogLeaseOptions(lease_ms=2.0), "lease_ms must be a positive integer"),  # type: ignore[arg-type]
        (lambda: RetryPolicy(max_attempts=1.5), "max_attempts must be a positive integer"),  # type: ignore[arg-type]
        (lambda: DurabilityFanout(targets={}, batch_delay_ms=0.5), "batch_delay_ms must be a"),  # type: ignore[arg-type]
        (lambda: RoutingClient(invoke=print, soft_backlog_limit=1.5), "soft_backlog_limit must"),  # type: ignore[arg-type]
    ],
)
def test_a_float_for_an_integer_option_is_a_type_and_a_value_error(
    build: Any, message: str
) -> None:
    """A float where an integer is needed is refused as a `ValueError` (the TypeScript
    library's `RangeError`) and as a `TypeError` (a wrong type), naming option and rule."""
    with pytest.raises(ValueError, match=message) as refused:
        build()
    assert isinstance(refused.value, TypeError)
    assert str(refused.value).endswith("got float")
