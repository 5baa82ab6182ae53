"""The callee side: transforms installed on a Durable Object class, and context arrival.

`apply_transforms(Class, all=[...], methods={...})` wraps the class's public async
methods once; which transforms run is looked up per call from every class in the
instance's MRO, so applying again (or on a subclass) adds to what is there. The
transforms of base classes run outermost, and a class's `all` list before its
per-method lists.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .define import (
    CalleeCall,
    CalleeHandler,
    Context,
    Transform,
    merge_context,
    next_arguments,
    settle,
)

RESERVED = frozenset(
    {
        "alarm",
        "connect",
        "email",
        "fetch",
        "queue",
        "scheduled",
        "set_context",
        "tail",
        "tail_stream",
        "test",
        "trace",
        "web_socket_close",
        "web_socket_error",
        "web_socket_message",
        "setContext",
        "tailStream",
        "webSocketClose",
        "webSocketError",
        "webSocketMessage",
    }
)
"""Handler names the platform calls itself: never wrapped, never dispatched by name."""

_PLATFORM_BASES = frozenset({"DurableObject", "WorkerEntrypoint", "RpcTarget", "object"})
_REGISTRY = "__durability_transforms__"
_ORIGINAL = "__durability_original__"


@dataclass(frozen=True, slots=True)
class RegisteredTransform:
    """A transform's callee side with the options it runs with."""

    transform: Transform
    options: Any = None


def register_transform(transform: Transform, options: Any = None) -> RegisteredTransform:
    """`transform`'s callee side with `options`, for `apply_transforms` lists."""
    if not isinstance(transform, Transform) or transform.callee_factory is None:
        raise TypeError("Transform does not define a callee")
    return RegisteredTransform(transform, options)


CalleeEntry = Transform | RegisteredTransform | tuple[Transform, Any]
"""What `apply_transforms` lists hold."""


@dataclass(slots=True)
class _Registry:
    all: list[CalleeHandler]
    methods: dict[str, list[CalleeHandler]]


def apply_transforms(
    cls: type,
    *,
    all: Iterable[CalleeEntry] = (),
    methods: Mapping[str, Iterable[CalleeEntry]] | None = None,
) -> None:
    """Install callee transforms on `cls` (cumulative; call once at import time).

    Entries are transforms (options None), `(transform, options)` pairs or
    `register_transform(transform, options)`. Every
    public async method of the class chain (up to the platform base classes) is
    wrapped, except the platform's own handlers; naming any other method in `methods`
    raises `TypeError`. A `set_context(context, method, args)` RPC method is added
    unless the class defines one, so callers' transform context reaches the chain.
    """
    if not isinstance(cls, type):
        raise TypeError(f"apply_transforms needs a class, got {type(cls).__name__}")
    wrappable = _async_methods(cls)
    per_method = dict(methods or {})
    for name in per_method:
        if name not in wrappable:
            raise TypeError(f"Cannot apply transforms to unknown method {name}")
    global_handlers = [_callee_handler(entry) for entry in all]
    method_handlers = {name: [_callee_handler(e) for e in per_method[name]] for name in per_method}
    registry: _Registry | None = cls.__dict__.get(_REGISTRY)
    if registry is None:
        registry = _Registry([], {})
        setattr(cls, _REGISTRY, registry)
    registry.all.extend(global_handlers)
    for name, handlers in method_handlers.items():
        registry.methods.setdefault(name, []).extend(handlers)
    for name, function in wrappable.items():
        if getattr(function, _ORIGINAL, None) is None:
            setattr(cls, name, _wrap(name, function))
    if not callable(getattr(cls, "set_context", None)):
        cls.set_context = _set_context  # type: ignore[attr-defined]


def _callee_handler(entry: object) -> CalleeHandler:
    if isinstance(entry, RegisteredTransform):
        registered = entry
    elif isinstance(entry, Transform):
        registered = register_transform(entry)
    elif isinstance(entry, tuple) and len(entry) == 2:
        registered = register_transform(*entry)
    else:
        raise TypeError(f"expected a transform, got {type(entry).__name__}")
    factory = registered.transform.callee_factory
    assert factory is not None  # register_transform checked it
    handler = factory(registered.options)
    if not callable(handler):
        raise TypeError("Callee transform factory must return a function")
    return handler


def _async_methods(cls: type) -> dict[str, Callable[..., Any]]:
    """The public async methods `cls` resolves, from its own chain up to the platform."""
    found: dict[str, Callable[..., Any]] = {}
    for klass in cls.__mro__:
        if klass.__name__ in _PLATFORM_BASES:
            break
        for name in vars(klass):
            if name.startswith("_") or name in RESERVED or name in found:
                continue
            function = getattr(cls, name)
            if inspect.iscoroutinefunction(getattr(function, _ORIGINAL, function)):
                found[name] = function
    return found


def _wrap(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await _dispatch(self, name, original, args, kwargs, {})

    method.__name__ = name
    method.__qualname__ = getattr(original, "__qualname__", name)
    method.__doc__ = original.__doc__
    setattr(method, _ORIGINAL, original)
    return method


def _chain(instance: Any, name: str) -> list[CalleeHandler]:
    handlers: list[CalleeHandler] = []
    for klass in reversed(type(instance).__mro__):
        registry: _Registry | None = klass.__dict__.get(_REGISTRY)
        if registry is not None:
            handlers.extend(registry.all)
            handlers.extend(registry.methods.get(name, ()))
    return handlers


async def _dispatch(
    instance: Any,
    name: str,
    original: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    context: Context,
) -> Any:
    handlers = _chain(instance, name)

    async def run(index: int, call_args: tuple[Any, ...], call_context: Context) -> Any:
        if index == len(handlers):
            return await original(instance, *call_args, **kwargs)

        def next_(given: object = None, *, context: object = None, args: Any = None) -> Any:
            context, args = next_arguments(given, context, args)
            forwarded = call_args if args is None else tuple(args)
            return run(index + 1, forwarded, merge_context(call_context, context))

        call = CalleeCall(
            name,
            call_args,
            dict(call_context),
            instance,
            getattr(instance, "env", None),
            getattr(instance, "ctx", None),
            next_,
        )
        return await settle(handlers[index](call))

    return await run(0, args, context)


class TransformContextTarget:
    """Dispatches calls to one instance through its callee chain with a given context."""

    __slots__ = ("_context", "_instance")

    def __init__(self, instance: Any, context: Context) -> None:
        self._instance = instance
        self._context = merge_context({}, context)

    async def invoke(self, method: str, args: Iterable[Any] = ()) -> Any:
        """Call `method(*args)` on the instance, its callee transforms seeing the context."""
        if not isinstance(method, str):
            raise TypeError(f"method must be a string, got {type(method).__name__}")
        if method in RESERVED:
            raise TypeError(f"Cannot dispatch reserved method {method}")
        bound = None if method.startswith("_") else getattr(self._instance, method, None)
        if not callable(bound):
            raise TypeError(f"Unable to dispatch {method}")
        original = getattr(bound, _ORIGINAL, None)
        if original is None:
            return await settle(bound(*args))
        return await _dispatch(self._instance, method, original, tuple(args), {}, self._context)


def create_transform_context_target(instance: Any, context: Context) -> TransformContextTarget:
    """A target whose `invoke(method, args)` runs `instance`'s callee chain with `context`."""
    return TransformContextTarget(instance, context)


async def _set_context(self: Any, context: Context, method: str, args: list[Any]) -> Any:
    """Receive a transformed call: run `method(*args)` with the caller's context."""
    target = create_transform_context_target(self, _python(context))
    return await target.invoke(method, _python(args))


def _python(value: Any) -> Any:
    """A JS proxy converted to Python (Cloudflare's built-in SDK passes RPC arguments raw)."""
    to_py = getattr(value, "to_py", None)
    return to_py() if callable(to_py) else value
