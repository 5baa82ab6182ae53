"""The built-in caller transforms: timeout, retry, error boundary, abort-as-success.

All of them live in the caller's memory only: nothing is persisted, and a timed-out
or retried call is never cancelled on the remote side. Time follows the loop's clock
(virtual under a `VirtualClock`).
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .._errors import CallerTimeoutError
from .define import CallerCall, CallerHandler, Transform, define_transform, settle

T = TypeVar("T")

_RETRY_BASE_MS = 100
_RETRY_CAP_MS = 30_000


@dataclass(frozen=True, slots=True)
class Ok(Generic[T]):
    """A call that returned `value` (from `error_boundary` and `abort_as_success`)."""

    value: T
    ok: bool = True


@dataclass(frozen=True, slots=True)
class Err:
    """A call that raised `error` (from `error_boundary`)."""

    error: BaseException
    ok: bool = False


@dataclass(frozen=True, slots=True)
class RetryAttempt:
    """What a retry `delay` function is told: the error and the retry's number (from 1)."""

    error: BaseException
    attempt: int


def _timeout(options: Any) -> CallerHandler:
    async def handler(call: CallerCall) -> Any:
        timeout_ms = options
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, (int, float)):
            raise TypeError("timeout_ms must be a non-negative finite number")
        if not math.isfinite(timeout_ms) or timeout_ms < 0:
            raise ValueError("timeout_ms must be a non-negative finite number")
        task = asyncio.ensure_future(call.next())
        done, _ = await asyncio.wait({task}, timeout=timeout_ms / 1000)
        if task in done:
            return task.result()
        # The remote call keeps running (racing never cancels it); its outcome is dropped.
        task.add_done_callback(_discard)
        raise CallerTimeoutError(call.method, timeout_ms)

    return handler


def _discard(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


timeout: Transform = define_transform().caller(_timeout)
"""`.with_(timeout, ms)`: raise `CallerTimeoutError(method, ms)` if the rest of the chain
has not finished within `ms` milliseconds. The remote call is not cancelled and may
still take effect. Placed before `retry`, it bounds all attempts together."""


def _retry_options(options: Any) -> tuple[int, Callable[[RetryAttempt], Any] | None]:
    if isinstance(options, Mapping):
        retries, delay = options.get("retries"), options.get("delay")
    else:
        retries, delay = options, None
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError("retries must be a non-negative integer")
    if delay is not None and not callable(delay):
        raise TypeError(f"retry delay must be callable, got {type(delay).__name__}")
    return retries, delay


def _retry(options: Any) -> CallerHandler:
    retries, delay = _retry_options(options)

    async def handler(call: CallerCall) -> Any:
        attempt = 0
        while True:
            try:
                return await call.next()
            except Exception as error:
                attempt += 1
                if attempt > retries:
                    raise
                await _pause(error, attempt, delay)

    return handler


async def _pause(
    error: Exception, attempt: int, delay: Callable[[RetryAttempt], Any] | None
) -> None:
    if delay is None:
        wait_ms: object = random.random() * min(_RETRY_BASE_MS * 2 ** (attempt - 1), _RETRY_CAP_MS)
    else:
        wait_ms = await settle(delay(RetryAttempt(error, attempt)))
    if (
        isinstance(wait_ms, bool)
        or not isinstance(wait_ms, (int, float))
        or not math.isfinite(wait_ms)
        or wait_ms < 0
    ):
        raise ValueError("retry delay must be a non-negative finite number")
    if wait_ms > 0:
        await asyncio.sleep(wait_ms / 1000)


retry: Transform = define_transform().caller(_retry)
"""`.with_(retry, n)` or `.with_(retry, {"retries": n, "delay": fn})`: call again after an
exception, sequentially, up to `n` more times, then raise the last error. The wait
before retry `k` is `fn(RetryAttempt(error, k))` ms, or full jitter up to
`min(100 * 2**(k-1), 30000)` ms. Every retry is a new call: use it only for idempotent
methods or with idempotency keys."""


def _error_boundary(options: Any) -> CallerHandler:
    async def handler(call: CallerCall) -> Ok[Any] | Err:
        try:
            return Ok(await call.next())
        except Exception as error:
            return Err(error)

    return handler


error_boundary: Transform = define_transform().caller(_error_boundary)
"""`.with_(error_boundary)`: return `Ok(value)` or `Err(error)` instead of raising."""


def _is_reset(error: BaseException) -> bool:
    return (
        getattr(error, "durable_object_reset", None) is True
        or getattr(error, "durableObjectReset", None) is True
    )


def _abort_as_success(options: Any) -> CallerHandler:
    async def handler(call: CallerCall) -> Ok[Any]:
        try:
            return Ok(await call.next())
        except Exception as error:
            if _is_reset(error):
                return Ok(None)
            raise

    return handler


abort_as_success: Transform = define_transform().caller(_abort_as_success)
"""`.with_(abort_as_success)`: an error marked `durable_object_reset` becomes `Ok(None)`
(the object was reset, e.g. by a deploy); other errors are raised; results are `Ok`."""
