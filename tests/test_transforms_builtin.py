"""Built-in caller transforms: timeout, retry, error_boundary, abort_as_success (virtual time)."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from conftest import START_MS, MakeRuntime
from durability import now_ms
from durability.runtime import DurableObject
from durability.testing import VirtualClock
from durability.transforms import (
    CallerTimeoutError,
    Err,
    Ok,
    RetryAttempt,
    abort_as_success,
    create_transform_stub,
    error_boundary,
    retry,
    timeout,
)


class Slow(DurableObject):
    async def work(self, ms: int) -> str:
        await asyncio.sleep(ms / 1000)
        await self.ctx.storage.put("done", True)
        return "worked"

    async def done(self) -> bool:
        return bool(await self.ctx.storage.get("done"))


class Flaky:
    """Fails its first `failures` calls; records the virtual time of every call."""

    def __init__(self, failures: int, hang: bool = False) -> None:
        self.failures = failures
        self.hang = hang
        self.calls: list[int] = []

    async def call(self, value: Any = None) -> Any:
        self.calls.append(now_ms() - START_MS)
        if self.hang:
            await asyncio.Event().wait()
        if len(self.calls) <= self.failures:
            raise ConnectionError(f"failure {len(self.calls)}")
        return value


async def test_timeout_raises_and_leaves_the_remote_call_running(
    make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """After the limit the caller gets CallerTimeoutError; the object's work still finishes."""
    async with make_runtime(bindings={"SLOW": Slow}) as rt:
        stub = rt.env.SLOW.get_by_name("s")
        call = asyncio.ensure_future(create_transform_stub(stub).with_(timeout, 5_000).work(10_000))
        await clock.advance(4_999)
        assert not call.done()
        await clock.advance(1)
        with pytest.raises(CallerTimeoutError) as raised:
            await call
        assert (raised.value.method, raised.value.timeout_ms) == ("work", 5_000)
        assert await stub.done() is False
        await clock.advance(5_000)
        assert await stub.done() is True


async def test_timeout_returns_a_result_in_time(
    make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """A call that finishes within the limit returns its result."""
    async with make_runtime(bindings={"SLOW": Slow}) as rt:
        stub = create_transform_stub(rt.env.SLOW.get_by_name("s")).with_(timeout, 5_000)
        call = asyncio.ensure_future(stub.work(1_000))
        await clock.advance(1_000)
        assert await call == "worked"


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (-1, ValueError),
        (math.inf, ValueError),
        (math.nan, ValueError),
        (True, TypeError),
        ("5", TypeError),
    ],
)
async def test_timeout_option_is_checked_when_called(value: Any, error: type[Exception]) -> None:
    """A bad timeout_ms is accepted by with_() and raises when the call is made."""
    target = Flaky(0)
    stub = create_transform_stub(target).with_(timeout, value)
    with pytest.raises(error, match="timeout_ms must be a non-negative finite number"):
        await stub.call()
    assert target.calls == []


async def test_retry_is_sequential_with_the_given_delays() -> None:
    """retry re-calls after each failure, waiting delay(attempt) ms, and returns the success."""
    seen: list[tuple[str, int]] = []

    def delay(info: RetryAttempt) -> int:
        seen.append((str(info.error), info.attempt))
        return 1_000 * info.attempt

    async with VirtualClock(START_MS) as clock:
        target = Flaky(2)
        stub = create_transform_stub(target).with_(retry, {"retries": 3, "delay": delay})
        call = asyncio.ensure_future(stub.call("v"))
        await clock.advance(3_000)
        assert await call == "v"
    assert target.calls == [0, 1_000, 3_000]
    assert seen == [("failure 1", 1), ("failure 2", 2)]


async def test_retry_raises_the_last_error_when_exhausted() -> None:
    """After retries re-calls the last error is raised."""
    async with VirtualClock(START_MS):
        target = Flaky(10)
        stub = create_transform_stub(target).with_(retry, {"retries": 2, "delay": lambda a: 0})
        with pytest.raises(ConnectionError, match="failure 3"):
            await stub.call()
    assert target.calls == [0, 0, 0]


async def test_retry_default_delay_is_capped_full_jitter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without delay the wait before retry k is random * min(100 * 2**(k-1), 30000) ms."""
    monkeypatch.setattr("durability._transforms.builtin.random.random", lambda: 0.5)
    async with VirtualClock(START_MS) as clock:
        target = Flaky(10)
        call = asyncio.ensure_future(create_transform_stub(target).with_(retry, 10).call(1))
        await clock.advance(60_000)
        assert await call == 1
    gaps = [b - a for a, b in zip(target.calls, target.calls[1:], strict=False)]
    assert gaps == [50, 100, 200, 400, 800, 1_600, 3_200, 6_400, 12_800, 15_000]


@pytest.mark.parametrize("options", [-1, 1.5, True, {"delay": lambda a: 0}, None])
def test_retry_count_must_be_a_non_negative_integer(options: Any) -> None:
    """retries must be an int >= 0 (given alone or as {"retries": n})."""
    with pytest.raises(ValueError, match="retries must be a non-negative integer"):
        create_transform_stub(Flaky(0)).with_(retry, options)


@pytest.mark.parametrize("bad", [-1, math.inf, math.nan, "1"])
async def test_retry_delay_must_be_non_negative_finite(bad: Any) -> None:
    """A delay function returning a negative or non-finite value raises ValueError."""
    stub = create_transform_stub(Flaky(5)).with_(retry, {"retries": 1, "delay": lambda a: bad})
    with pytest.raises(ValueError, match="retry delay must be a non-negative finite number"):
        await stub.call()


async def test_async_delay_is_awaited() -> None:
    """The delay function may be async."""

    async def delay(info: RetryAttempt) -> int:
        return 250

    async with VirtualClock(START_MS) as clock:
        target = Flaky(1)
        call = asyncio.ensure_future(
            create_transform_stub(target).with_(retry, {"retries": 1, "delay": delay}).call(2)
        )
        await clock.advance(250)
        assert await call == 2
    assert target.calls == [0, 250]


async def test_timeout_before_retry_bounds_all_attempts() -> None:
    """with_(timeout).with_(retry): the one limit covers every attempt and wait."""
    async with VirtualClock(START_MS) as clock:
        target = Flaky(100)
        stub = (
            create_transform_stub(target)
            .with_(timeout, 1_000)
            .with_(retry, {"retries": 10, "delay": lambda a: 400})
        )
        call = asyncio.ensure_future(stub.call())
        await clock.advance(1_000)
        with pytest.raises(CallerTimeoutError):
            await call
    assert target.calls == [0, 400, 800]


async def test_retry_before_timeout_bounds_each_attempt() -> None:
    """with_(retry).with_(timeout): each attempt gets the limit, and timeouts are retried."""
    async with VirtualClock(START_MS) as clock:
        target = Flaky(0, hang=True)
        stub = (
            create_transform_stub(target)
            .with_(retry, {"retries": 2, "delay": lambda a: 0})
            .with_(timeout, 100)
        )
        call = asyncio.ensure_future(stub.call())
        await clock.advance(300)
        with pytest.raises(CallerTimeoutError):
            await call
    assert target.calls == [0, 100, 200]


async def test_error_boundary_returns_ok_or_err() -> None:
    """error_boundary turns a result into Ok(value) and an exception into Err(error)."""
    good = create_transform_stub(Flaky(0)).with_(error_boundary)
    assert await good.call(5) == Ok(5)
    outcome = await create_transform_stub(Flaky(1)).with_(error_boundary).call()
    assert isinstance(outcome, Err) and not outcome.ok
    assert isinstance(outcome.error, ConnectionError)


class ResetError(Exception):
    durable_object_reset = True


async def test_abort_as_success_absorbs_resets_only() -> None:
    """An error marked durable_object_reset becomes Ok(None); others are raised."""

    class Target:
        async def reset(self) -> None:
            raise ResetError("object was reset")

        async def fail(self) -> None:
            raise ConnectionError("other")

        async def ok(self) -> int:
            return 3

    stub = create_transform_stub(Target()).with_(abort_as_success)
    assert await stub.reset() == Ok(None)
    assert await stub.ok() == Ok(3)
    with pytest.raises(ConnectionError):
        await stub.fail()
