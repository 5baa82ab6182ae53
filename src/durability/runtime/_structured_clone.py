"""A WebSocket attachment as workerd keeps it: a structured clone, limited in size.

`ws.serializeAttachment(value)` on Cloudflare copies a JavaScript value. Python's
`None`, bools, numbers and strings become JavaScript ones; a container must have been
converted with `to_js` (a plain Python list or dict reaches JavaScript as a proxy,
which cannot be cloned: `DataCloneError`). The copy's size is that of V8's serializer,
and workerd refuses more than 16384 bytes: `clone_size` counts those bytes (measured on
a local workerd for strings of one and two bytes per character, numbers, arrays and
objects; sets and byte arrays are counted the same way, unmeasured).
"""

from __future__ import annotations

import math
from typing import Any

from ._js_containers import JsArray, JsBuffer, JsObject, JsSet
from ._js_errors import js_error
from ._js_values import MAX_SAFE_INTEGER, JsBigInt

__all__ = ["clone_attachment", "clone_size"]

_HEADER = 2
"""V8's serializer writes its version first (two bytes)."""

_SMI_BITS = 30
"""V8 writes integers of 31 bits (-2**30 to 2**30 - 1) as small integers."""


def clone_attachment(value: Any) -> Any:
    """A copy of `value` as JavaScript would clone it and Python read it back (marked
    containers stay marked, an integral float is an `int` and an integer past 2**53 a
    `JsBigInt`); `DataCloneError` for what it cannot clone."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
        return int(value)
    if value is None or isinstance(value, bool | str | float):
        return value
    if isinstance(value, int):
        return JsBigInt(value) if abs(value) > MAX_SAFE_INTEGER else int(value)
    if isinstance(value, JsArray):
        return JsArray(clone_attachment(item) for item in value)
    if isinstance(value, JsObject):
        return JsObject((k, clone_attachment(v)) for k, v in value.items())
    if isinstance(value, JsSet):
        return JsSet(clone_attachment(item) for item in value)
    if isinstance(value, JsBuffer):
        return JsBuffer(value)
    message = "function(){}" if callable(value) else "[object Object]"
    raise js_error("DataCloneError", f"{message} could not be cloned.", TypeError)


def clone_size(value: Any) -> int:
    """The bytes V8's serializer writes for `value` (a value `clone_attachment` takes)."""
    return _size(value, _HEADER)


def _small(number: int) -> bool:
    return bool(-(2**_SMI_BITS) <= number < 2**_SMI_BITS)


def _varint(number: int) -> int:
    return max(1, math.ceil(number.bit_length() / 7))


def _size(value: Any, at: int) -> int:
    """The offset after writing `value` at offset `at`."""
    if value is None or isinstance(value, bool):
        return at + 1
    if isinstance(value, int):
        if _small(value):
            return at + 1 + _varint(value * 2 if value >= 0 else -value * 2 - 1)
        if abs(value) <= MAX_SAFE_INTEGER:
            return at + 9
        digits = math.ceil(abs(value).bit_length() / 64)
        return at + 1 + _varint(digits * 16 + (value < 0)) + 8 * digits
    if isinstance(value, float):
        if value.is_integer() and _small(int(value)):
            return _size(int(value), at)
        return at + 9
    if isinstance(value, str):
        return _string_size(value, at)
    if isinstance(value, JsArray):
        at += 1 + _varint(len(value))
        for item in value:
            at = _size(item, at)
        return at + 1 + 1 + _varint(len(value))
    if isinstance(value, JsObject):
        at += 1
        for key, item in value.items():
            index = str(key)
            at = _size(int(index) if index.isdigit() else index, at)
            at = _size(item, at)
        return at + 1 + _varint(len(value))
    if isinstance(value, JsSet):
        at += 1
        for item in value:
            at = _size(item, at)
        return at + 1 + _varint(len(value))
    length = len(value)
    return at + 1 + _varint(length) + length + 2 + _varint(0) + _varint(length) + 1


def _string_size(text: str, at: int) -> int:
    """A string of one byte per character when all are Latin-1, else of UTF-16 units
    (aligned to an even offset, as V8 pads it)."""
    if all(ord(char) < 256 for char in text):
        return at + 1 + _varint(len(text)) + len(text)
    length = len(text.encode("utf-16-le"))
    head = 1 + _varint(length)
    padding = (at + head) % 2
    return at + padding + head + length
