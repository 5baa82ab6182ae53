"""How a key-value pair's value is kept in the object's `_durability_kv` table.

A JSON value (the common case, and all a store written before held) is kept as its
JSON text. A value with parts JSON cannot hold (bytes, sets, datetimes, NaN and the
infinities, exceptions) is kept as `~` followed by the JSON text of a tagged tree in
which every list, dict and special value is a one-key object: JSON text never starts
with `~`, so the two forms cannot be confused. Values are read back as Cloudflare
reads them (dicts as `JsDict`, bytes as a `memoryview`, see `_js_values`).
"""

from __future__ import annotations

import base64
import json
import math
from datetime import datetime
from typing import Any

from ._js_values import JsDict, datetime_ms, from_js_int, utc_datetime

TAGGED = "~"
_PLAIN = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class _NotJson(Exception):
    """The value has a part plain JSON cannot hold."""


def encode(value: Any) -> str:
    """The stored text of an already converted value (see `_js_values.to_remote`)."""
    try:
        _check_plain(value)
    except _NotJson:
        return TAGGED + _PLAIN.encode(_tag(value))
    return _PLAIN.encode(value)


def decode(text: str) -> Any:
    """The value stored as `text`."""
    if text.startswith(TAGGED):
        return _untag(json.loads(text[1:], parse_int=_int))
    return json.loads(text, object_hook=JsDict, parse_int=_int)


def _int(text: str) -> int:
    return from_js_int(int(text))


def _check_plain(value: Any) -> None:
    kind = type(value)
    if kind is str or isinstance(value, int) or value is None:
        return
    if kind is float:
        if not math.isfinite(value):
            raise _NotJson
        return
    if isinstance(value, list):
        for item in value:
            _check_plain(item)
        return
    if isinstance(value, dict):
        for item in value.values():
            _check_plain(item)
        return
    raise _NotJson


def _tag(value: Any) -> Any:
    kind = type(value)
    if kind is str or isinstance(value, int) or value is None:
        return value
    if kind is float:
        if math.isfinite(value):
            return value
        return {"f": "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"}
    if isinstance(value, list):
        return {"l": [_tag(item) for item in value]}
    if isinstance(value, dict):
        return {"d": {key: _tag(item) for key, item in value.items()}}
    if isinstance(value, set):
        return {"s": [_tag(item) for item in value]}
    if isinstance(value, memoryview):
        return {"b": base64.b64encode(value).decode("ascii")}
    if isinstance(value, datetime):
        return {"t": datetime_ms(value)}
    if isinstance(value, BaseException):
        return {"e": str(value)}
    raise TypeError(f"cannot store a value of type {type(value).__name__}")


def _untag(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    ((tag, body),) = node.items()
    if tag == "l":
        return [_untag(item) for item in body]
    if tag == "d":
        return JsDict((key, _untag(item)) for key, item in body.items())
    if tag == "s":
        return {_untag(item) for item in body}
    if tag == "b":
        return memoryview(base64.b64decode(body))
    if tag == "t":
        return utc_datetime(body)
    if tag == "f":
        return _FLOATS[body]
    if tag == "e":
        return Exception(body)
    raise ValueError(f"unknown tag {tag!r} in a stored value")
