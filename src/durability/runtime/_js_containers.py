"""What pyodide's `to_js` gives back here: containers marked as JavaScript ones.

On Cloudflare `to_js([1, 2])` is a JavaScript array, and a plain Python list handed to a
JavaScript API arrives as a proxy of the Python object instead, which some APIs refuse
(WebSocket tags must be an array, an attachment must be a value JavaScript can clone).
Here `to_js` gives `JsArray`, `JsObject`, `JsSet` and `JsBuffer`: still a
Python list, dict, set or bytes (code reading them works unchanged), with `to_py()`,
and marked, so the runtime can refuse the unmarked ones where Cloudflare does.
"""

from __future__ import annotations

from typing import Any

from ._js_values import MAX_SAFE_INTEGER, js_number_text

__all__ = [
    "JsArray",
    "JsBuffer",
    "JsContainer",
    "JsObject",
    "JsSet",
    "js_text",
    "to_js",
    "to_py",
]


class JsArray(list[Any]):
    """A JavaScript array (from `to_js(list)` or `to_js(tuple)`)."""

    def to_py(self) -> list[Any]:
        return [to_py(item) for item in self]


class JsObject(dict[Any, Any]):
    """A plain JavaScript object (from `to_js(dict)`: the Pyodide of the workerd measured
    makes an object of a dict, with or without `dict_converter=Object.fromEntries`)."""

    def to_py(self) -> dict[Any, Any]:
        return {to_py(key): to_py(item) for key, item in self.items()}


class JsSet(set[Any]):
    """A JavaScript `Set` (from `to_js(set)`)."""

    def to_py(self) -> set[Any]:
        return {to_py(item) for item in self}


class JsBuffer(bytes):
    """A JavaScript `Uint8Array` (from `to_js(bytes)`): `to_bytes()` and `to_py()`."""

    def to_bytes(self) -> bytes:
        return bytes(self)

    def to_py(self) -> bytes:
        return bytes(self)


JsContainer = JsArray | JsObject | JsSet | JsBuffer
"""A value `to_js` marked."""


def to_js(value: Any, **options: Any) -> Any:
    """`value` with its lists, tuples, dicts, sets and bytes marked as JavaScript ones
    (deeply, as `to_js` converts); anything else unchanged."""
    if isinstance(value, JsArray | JsObject | JsSet | JsBuffer):
        return value
    if isinstance(value, list | tuple):
        return JsArray(to_js(item) for item in value)
    if isinstance(value, dict):
        return JsObject((key, to_js(item)) for key, item in value.items())
    if isinstance(value, set | frozenset):
        return JsSet(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return JsBuffer(value)
    return value


def js_text(value: Any) -> str:
    """The text JavaScript's `String()` makes of a value Python hands it: numbers and
    `None` (undefined) as JavaScript writes them, marked containers as JavaScript's
    `toString()` does, and any other Python value (a proxy there) as Python's `str`."""
    if value is None:
        return "undefined"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return js_number_text(float(value)) if abs(value) <= MAX_SAFE_INTEGER else str(value)
    if isinstance(value, JsArray):
        return ",".join("" if item is None else js_text(item) for item in value)
    if isinstance(value, JsObject):
        return "[object Object]"
    if isinstance(value, JsSet):
        return "[object Set]"
    return str(value)


def to_py(value: Any) -> Any:
    """A marked value as plain Python (what `JsProxy.to_py()` gives); others unchanged."""
    method = getattr(value, "to_py", None) if isinstance(value, JsContainer) else None
    return method() if method is not None else value
