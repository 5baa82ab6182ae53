"""Python callbacks run by JavaScript (`transaction`, `blockConcurrencyWhile`, ...).

JavaScript gets a proxy of the callback that lives until the call is over (a proxy
borrowed for the call alone would be destroyed before an async callback runs). The
callback's outcome stays on the Python side: its value is returned as is, and an
exception it raised is re-raised as itself, not as the `JsException: PythonError`
JavaScript turns it into.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar, cast

from ._ffi import create_proxy, destroy_proxy

T = TypeVar("T")


class _Outcome(Generic[T]):
    """What the callback returned or raised."""

    __slots__ = ("error", "value")

    def __init__(self) -> None:
        self.value: T | None = None
        self.error: BaseException | None = None


def call_sync(method: Callable[[Any], Any], fn: Callable[[], T]) -> T:
    """`method(callback)`, where JavaScript calls `callback()` synchronously."""
    outcome: _Outcome[T] = _Outcome()

    def callback() -> None:
        try:
            outcome.value = fn()
        except BaseException as error:
            outcome.error = error
            raise

    proxy = create_proxy(callback)
    try:
        method(proxy)
    except BaseException:
        if outcome.error is None:
            raise
    finally:
        destroy_proxy(proxy)
    return _settle(outcome)


async def call_async(
    method: Callable[[Any], Awaitable[Any]], fn: Callable[..., Awaitable[T] | T]
) -> T:
    """`await method(callback)`, where JavaScript awaits `callback(*args)`; `fn` gets the
    arguments JavaScript passes (none, or a transaction), and its result is awaited when
    it is awaitable, so plain functions work as on the embedded runtime."""
    outcome: _Outcome[T] = _Outcome()

    async def callback(*args: Any) -> None:
        try:
            value = fn(*args)
            outcome.value = cast(T, await value) if inspect.isawaitable(value) else value
        except BaseException as error:
            outcome.error = error
            raise

    proxy = create_proxy(callback)
    try:
        await method(proxy)
    except BaseException:
        if outcome.error is None:
            raise
    finally:
        destroy_proxy(proxy)
    return _settle(outcome)


def _settle(outcome: _Outcome[T]) -> T:
    """The callback's value, or its own exception raised again."""
    if outcome.error is not None:
        raise outcome.error
    return cast(T, outcome.value)
