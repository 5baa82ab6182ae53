"""What a transform is: a caller-side and/or callee-side middleware factory.

A transform is declared once with `define_transform()` and attached per call site
(`stub.with_(transform, options)`) or per class (`apply_transforms`). Each side's
factory receives the options given at attach time and returns the handler that runs
on every call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Context = Mapping[str, Any]
"""Transform context: caller metadata merged along the chain. Untrusted: never use it
for authentication or authorization."""


@dataclass(frozen=True, slots=True)
class CallerCall:
    """What a caller-side handler sees of one call."""

    method: str
    args: tuple[Any, ...]
    context: Mapping[str, Any]
    """The context accumulated so far (a copy; add to it through `next(context=...)`)."""
    next: Callable[..., Awaitable[Any]]
    """`await call.next(context=None, args=None)` runs the rest of the chain; `context`
    is merged over the accumulated one (later values win), `args` replaces the
    arguments (`call.next({"context": ...})` works too). It may be called more than
    once (that is how `retry` works)."""


@dataclass(frozen=True, slots=True)
class CalleeCall:
    """What a callee-side handler sees of one call arriving at an object."""

    method: str
    args: tuple[Any, ...]
    context: Mapping[str, Any]
    """The context the caller's transforms sent (empty for a plain call)."""
    instance: Any
    """The object the call is for."""
    env: Any
    """The instance's `env` (None if it has none)."""
    state: Any
    """The instance's `ctx` (None if it has none)."""
    next: Callable[..., Awaitable[Any]]
    """`await call.next(context=None, args=None)` runs the rest of the chain and the method."""


CallerHandler = Callable[[CallerCall], Any]
CalleeHandler = Callable[[CalleeCall], Any]
CallerFactory = Callable[[Any], CallerHandler]
CalleeFactory = Callable[[Any], CalleeHandler]


@dataclass(frozen=True, slots=True)
class Transform:
    """A transform definition: build one with `define_transform()`.

    `caller(factory)` and `callee(factory)` return a new definition with that side
    set, so both sides can be chained in either order.
    """

    caller_factory: CallerFactory | None = None
    callee_factory: CalleeFactory | None = None
    type: str = field(default="do-transform")

    def caller(self, factory: CallerFactory) -> Transform:
        """This definition with its caller side built by `factory(options)`."""
        _check_factory("caller", factory)
        return Transform(factory, self.callee_factory)

    def callee(self, factory: CalleeFactory) -> Transform:
        """This definition with its callee side built by `factory(options)`."""
        _check_factory("callee", factory)
        return Transform(self.caller_factory, factory)


def define_transform() -> Transform:
    """An empty transform definition; add sides with `.caller(...)` and `.callee(...)`."""
    return Transform()


def _check_factory(side: str, factory: object) -> None:
    if not callable(factory):
        raise TypeError(f"{side} factory must be callable, got {type(factory).__name__}")


def merge_context(context: Context, update: object) -> dict[str, Any]:
    """`context` with `update` (a mapping or None) shallow-merged over it."""
    merged = dict(context)
    if update is None:
        return merged
    if not isinstance(update, Mapping):
        raise TypeError(f"transform context must be a mapping, got {type(update).__name__}")
    merged.update(update)
    return merged


def next_arguments(given: object, context: object, args: object) -> tuple[object, object]:
    """`next()`'s `(context, args)`: given as keywords, or as one mapping with "context"
    and/or "args" keys (the TypeScript library's `next({context})` form)."""
    if given is None:
        return context, args
    if not isinstance(given, Mapping):
        raise TypeError(f"next() takes a mapping or keywords, got {type(given).__name__}")
    if context is not None or args is not None:
        raise TypeError("next() takes a mapping or keywords, not both")
    return given.get("context"), given.get("args")


async def settle(value: Any) -> Any:
    """`value`, awaited if it is awaitable (handlers may be sync or async)."""
    if isinstance(value, Awaitable):
        return await value
    return value
