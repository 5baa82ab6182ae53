"""Copying call arguments and results as JSON values, fast for the common shapes."""

from __future__ import annotations

import math
from typing import Any, cast

from .._serialization import copy_json
from .._types import JsonValue

_MAX_FAST_DEPTH = 64
_SCALARS = frozenset({str, int, bool})


class _SlowPath(Exception):
    """The value needs the full JSON round trip (subclasses, deep nesting, or an error)."""


def copy_value(value: object, what: str) -> JsonValue:
    """A deep copy of a JSON value, as `copy_json` makes it; `TypeError` if not JSON.

    Plain lists, dicts and scalars are copied directly; anything else (subclasses,
    very deep nesting, invalid values) goes through the JSON text round trip, which
    also produces the error message.
    """
    if value is None or type(value) in _SCALARS:
        # Typed through Any, so no `cast` (a Python-level call) runs for a scalar.
        unchecked: Any = value
        scalar: JsonValue = unchecked
        return scalar
    try:
        return _copy(value, 0)
    except _SlowPath:
        return copy_json(value, what)


def copy_arguments(args: tuple[object, ...]) -> tuple[JsonValue, ...] | list[JsonValue]:
    """`copy_value(list(args), "arguments")`, without copying the common scalars twice:
    arguments that are all scalars come back as the same tuple (nothing in it can
    change)."""
    items: tuple[Any, ...] = args
    for item in items:
        if not (item is None or type(item) in _SCALARS):
            break
    else:
        scalars: tuple[JsonValue, ...] = items
        return scalars
    copied: list[JsonValue] = []
    try:
        for item in items:
            copied.append(item if item is None or type(item) in _SCALARS else _copy(item, 1))
    except _SlowPath:
        return cast("list[JsonValue]", copy_json(list(args), "arguments"))
    return copied


def _copy(value: object, depth: int) -> JsonValue:
    kind = type(value)
    if value is None or kind in _SCALARS:
        return cast(JsonValue, value)
    if kind is float:
        if math.isfinite(cast(float, value)):
            return cast(float, value)
        raise _SlowPath
    if depth >= _MAX_FAST_DEPTH:
        raise _SlowPath
    if kind is list:
        return [_copy(item, depth + 1) for item in cast(list[object], value)]
    if kind is dict:
        copied: dict[str, JsonValue] = {}
        for key, item in cast(dict[object, object], value).items():
            if type(key) is not str:
                raise _SlowPath
            copied[key] = _copy(item, depth + 1)
        return copied
    raise _SlowPath
