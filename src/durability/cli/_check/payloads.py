"""Whether a stored payload still fits the handler that would get it: its signature (it
must take the one argument the engine passes) and the payload type it declares
(`call: DurableCall[Order]`). Types are judged structurally, on the JSON value: a
`TypedDict` needs its required keys, a dataclass its fields without defaults (and no
unknown ones), containers their items; a type that cannot be judged fits."""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, get_args, get_origin

_SCALARS: dict[type, tuple[type, ...]] = {
    str: (str,),
    bool: (bool,),
    int: (int,),
    float: (int, float),
    type(None): (type(None),),
}


def signature_problem(handler: Callable[..., Any], arguments: int = 1) -> str | None:
    """Why the engine can no longer call `handler` with its `arguments` positional
    arguments (one: the call or alarm info; two for a workflow: event and step)."""
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(*(object() for _ in range(arguments)))
    except TypeError as error:
        count = "one argument" if arguments == 1 else f"{arguments} arguments"
        return f"its handler can no longer be called with {count} ({error})"
    return None


def declared_payload(handler: Callable[..., Any]) -> Any:
    """The payload type `handler` declares on its first parameter (`DurableCall[T]`'s
    `T`), or `Any` when it declares none or it cannot be read."""
    try:
        hints = typing.get_type_hints(handler)
    except Exception:
        return Any
    parameters = [p for p in inspect.signature(handler).parameters.values() if p.name != "self"]
    if not parameters or parameters[0].name not in hints:
        return Any
    arguments = get_args(hints[parameters[0].name])
    return arguments[0] if arguments else Any


def mismatch(value: Any, expected: Any, where: str = "payload") -> str | None:
    """Why `value` does not fit `expected`, or `None` when it fits (or cannot be judged)."""
    if expected is Any or expected is object or isinstance(expected, typing.TypeVar):
        return None
    origin = get_origin(expected)
    if origin in (typing.Union, types.UnionType):
        problems = [mismatch(value, option, where) for option in get_args(expected)]
        return None if any(p is None for p in problems) else problems[0]
    if origin is typing.Literal:
        return (
            None
            if value in get_args(expected)
            else f"{where} is {value!r}, not one of {get_args(expected)}"
        )
    if expected in _SCALARS:
        kinds = _SCALARS[expected]
        if isinstance(value, kinds) and not (expected is not bool and isinstance(value, bool)):
            return None
        return f"{where} is {type(value).__name__}, the handler declares {expected.__name__}"
    if typing.is_typeddict(expected):
        return _typed_dict(value, expected, where)
    if dataclasses.is_dataclass(expected) and isinstance(expected, type):
        return _dataclass(value, expected, where)
    container = origin if origin is not None else expected
    if isinstance(container, type) and issubclass(container, Mapping):
        if not isinstance(value, dict):
            return f"{where} is {type(value).__name__}, the handler declares a mapping"
        item = get_args(expected)[1] if len(get_args(expected)) == 2 else Any
        return _first(mismatch(v, item, f"{where}[{k!r}]") for k, v in value.items())
    if isinstance(container, type) and issubclass(container, Sequence) and container is not str:
        if not isinstance(value, list):
            return f"{where} is {type(value).__name__}, the handler declares a sequence"
        item = get_args(expected)[0] if get_args(expected) else Any
        return _first(mismatch(v, item, f"{where}[{i}]") for i, v in enumerate(value))
    return None


def _typed_dict(value: Any, expected: Any, where: str) -> str | None:
    if not isinstance(value, dict):
        return f"{where} is {type(value).__name__}, the handler declares {expected.__name__}"
    missing = sorted(set(expected.__required_keys__) - set(value))
    if missing:
        return f"{where} lacks {', '.join(map(repr, missing))}, which {expected.__name__} requires"
    hints = typing.get_type_hints(expected)
    return _first(
        mismatch(value[key], hints[key], f"{where}[{key!r}]") for key in value if key in hints
    )


def _dataclass(value: Any, expected: type, where: str) -> str | None:
    if not isinstance(value, dict):
        return f"{where} is {type(value).__name__}, the handler declares {expected.__name__}"
    fields = {field.name: field for field in dataclasses.fields(expected)}
    required = {
        name
        for name, field in fields.items()
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
    }
    missing = sorted(required - set(value))
    if missing:
        return f"{where} lacks {', '.join(map(repr, missing))}, which {expected.__name__} requires"
    unknown = sorted(set(value) - set(fields))
    if unknown:
        return (
            f"{where} has {', '.join(map(repr, unknown))}, which {expected.__name__} no longer has"
        )
    hints = typing.get_type_hints(expected)
    return _first(
        mismatch(value[key], hints[key], f"{where}[{key!r}]") for key in value if key in hints
    )


def _first(problems: Any) -> str | None:
    return next((problem for problem in problems if problem is not None), None)
