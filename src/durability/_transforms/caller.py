"""The caller side: a stub proxy that runs attached transforms around every method call.

At the end of the chain a call with an empty context goes straight to the target's
method (keyword arguments included; transforms see the positional ones). A call
carrying context needs a target that can receive it: one call,
`target.set_context(context, method, args)`, delivers both (stubs copy JSON values,
so the TypeScript library's two-step form, which returns a live target, cannot cross RPC).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from .define import (
    CallerCall,
    CallerHandler,
    Context,
    Transform,
    merge_context,
    next_arguments,
    settle,
)

T = TypeVar("T")


class TransformStub(Generic[T]):
    """A proxy on `target`: method calls run the attached caller transforms in order.

    `with_(transform, options)` returns a new stub with one more transform; this one is
    unchanged. Attributes that are not methods pass through.
    """

    __slots__ = ("_handlers", "_target")

    def __init__(self, target: T, handlers: tuple[CallerHandler, ...] = ()) -> None:
        self._target = target
        self._handlers = handlers

    def with_(self, transform: Transform, options: Any = None) -> TransformStub[T]:
        """A new stub with `transform`'s caller side (built from `options`) appended."""
        if not isinstance(transform, Transform) or transform.caller_factory is None:
            raise TypeError("Transform does not define a caller")
        handler = transform.caller_factory(options)
        if not callable(handler):
            raise TypeError("Caller transform factory must return a function")
        return TransformStub(self._target, (*self._handlers, handler))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(self._target, name)
        if not callable(value):
            return value
        target, handlers = self._target, self._handlers

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await _run(target, handlers, 0, name, args, kwargs, {})

        call.__name__ = name
        return call

    def __repr__(self) -> str:
        return f"TransformStub({self._target!r}, transforms={len(self._handlers)})"


def create_transform_stub(target: T, transforms: Any = ()) -> TransformStub[T]:
    """A transformable proxy on `target` (a Durable Object stub, a service, any object).

    `transforms` is an optional sequence of `(transform, options)` pairs attached in
    order, the same as chaining `.with_()`.
    """
    stub: TransformStub[T] = TransformStub(target)
    for transform, options in transforms:
        stub = stub.with_(transform, options)
    return stub


async def _run(
    target: Any,
    handlers: tuple[CallerHandler, ...],
    index: int,
    method: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    context: Context,
) -> Any:
    if index == len(handlers):
        return await _deliver(target, method, args, kwargs, context)

    def next_(given: object = None, *, context: object = None, args: Any = None) -> Any:
        context, args = next_arguments(given, context, args)
        forwarded = call_args if args is None else tuple(args)
        merged = merge_context(call_context, context)
        return _run(target, handlers, index + 1, method, forwarded, kwargs, merged)

    call_args, call_context = args, context
    return await settle(handlers[index](CallerCall(method, args, dict(context), next_)))


async def _deliver(
    target: Any, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], context: Context
) -> Any:
    if not context:
        return await settle(getattr(target, method)(*args, **kwargs))
    set_context: Callable[..., Any] | None = getattr(target, "set_context", None)
    if not callable(set_context):
        raise TypeError("Cannot send transform context to a target without set_context")
    if kwargs:
        raise TypeError(
            f"{method}: pass arguments positionally when transforms add context "
            f"(got keyword arguments {sorted(kwargs)})"
        )
    return await settle(set_context(dict(context), method, list(args)))


class TransformNamespace:
    """A namespace whose stubs are transform stubs; every other member passes through."""

    __slots__ = ("_namespace",)

    def __init__(self, namespace: Any) -> None:
        self._namespace = namespace

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._namespace, name)
        if name in ("get", "get_by_name", "getByName") and callable(value):

            def get(*args: Any, **kwargs: Any) -> TransformStub[Any]:
                return TransformStub(value(*args, **kwargs))

            return get
        return value


def with_transforms(namespace: Any) -> TransformNamespace:
    """Wrap a Durable Object namespace so `get(...)`/`get_by_name(...)` give transform stubs."""
    return TransformNamespace(namespace)
