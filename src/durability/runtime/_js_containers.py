"""What pyodide's `to_js` gives back here: containers marked as JavaScript ones.

On Cloudflare `to_js([1, 2])` is a JavaScript array, and a plain Python list handed to a
JavaScript API arrives as a proxy of the Python object instead, which some APIs refuse
(WebSocket tags must be an array, an attachment must be a value JavaScript can clone).
Here `to_js` gives `JsArray`, `JsMap`, `JsObject`, `JsSet` and `JsBuffer`: still a
Python list, dict, set or bytes (code reading them works unchanged), with `to_py()`,
and marked, so the runtime can refuse the unmarked ones where Cloudflare does.
"""

from __future__ import annotations

from typing import Any

__all__ = ["JsArray", "JsBuffer", "JsContainer", "JsMap", "JsObject", "JsSet", "to_js", "to_py"]


class JsArray(list[Any]):
    """A JavaScript array (from `to_js(list)` or `to_js(tuple)`)."""

    def to_py(self) -> list[Any]:
        return [to_py(item) for item in self]


class JsMap(dict[Any, Any]):
    """A JavaScript `Map` (from `to_js(dict)`)."""

    def to_py(self) -> dict[Any, Any]:
        return {to_py(key): to_py(item) for key, item in self.items()}


class JsObject(JsMap):
    """A plain JavaScript object (from `to_js(dict, dict_converter=Object.fromEntries)`)."""


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


JsContainer = JsArray | JsMap | JsSet | JsBuffer
"""A value `to_js` marked."""


def to_js(value: Any, *, dict_converter: Any = None, **options: Any) -> Any:
    """`value` with its lists, tuples, dicts, sets and bytes marked as JavaScript ones
    (deeply, as `to_js` converts); anything else unchanged."""
    if isinstance(value, JsArray | JsMap | JsSet | JsBuffer):
        return value
    if isinstance(value, list | tuple):
        return JsArray(to_js(item, dict_converter=dict_converter) for item in value)
    if isinstance(value, dict):
        kind = JsMap if dict_converter is None else JsObject
        return kind(
            (key, to_js(item, dict_converter=dict_converter)) for key, item in value.items()
        )
    if isinstance(value, set | frozenset):
        return JsSet(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return JsBuffer(value)
    return value


def to_py(value: Any) -> Any:
    """A marked value as plain Python (what `JsProxy.to_py()` gives); others unchanged."""
    method = getattr(value, "to_py", None) if isinstance(value, JsContainer) else None
    return method() if method is not None else value
