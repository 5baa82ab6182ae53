"""The Pyodide boundary: lazy `js`/`pyodide.ffi` access and value conversion both ways.

Nothing here imports `js` or `pyodide` at module level, so the package imports on
CPython. They are looked up when a Cloudflare value is converted; where they do not
exist (a CPython test double of the wrapping SDK, which hands out plain Python values),
nothing is a JavaScript proxy, `None` is the only null, and callbacks are passed as
they are. The embedded runtime's stand-ins for those modules (marked `STAND_IN_MARK`) count
as absent: they exist only so that Worker code imports off Cloudflare.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from .._types import MAX_SAFE_INTEGER, STAND_IN_MARK

MAX_BINDINGS = 100
"""Bound parameters per query that Cloudflare's SQLite-backed Durable Objects accept."""

_INT32 = 2**31
"""Ints in [-2**31, 2**31) reach JavaScript as plain numbers under every Pyodide."""

_absent: set[str] = set()
"""Modules that failed to import once (a failed import is not cached by Python)."""


def _module(name: str) -> ModuleType | None:
    """Module `name` if it is loaded or can be, else `None` (also for the embedded
    runtime's stand-ins of `js` and `pyodide`, which convert nothing)."""
    module = sys.modules.get(name)
    if module is None and name not in _absent:
        try:
            module = importlib.import_module(name)
        except ImportError:
            _absent.add(name)
            return None
    if getattr(module, STAND_IN_MARK, False):
        return None
    return module


def ffi() -> Any:
    """The `pyodide.ffi` module (`JsProxy`, `jsnull`, `to_js`, `create_proxy`, ...)."""
    return _module("pyodide.ffi")


def js() -> Any:
    """The `js` module (the JavaScript global scope), or `None` outside Pyodide."""
    return _module("js")


def is_js_proxy(value: object) -> bool:
    """True when `value` is a raw JavaScript object (the built-in SDK hands these out)."""
    module = ffi()
    return module is not None and isinstance(value, module.JsProxy)


def create_proxy(fn: Callable[..., Any]) -> Any:
    """A JavaScript function calling `fn` that lives until `destroy_proxy`."""
    module = ffi()
    return fn if module is None else module.create_proxy(fn)


def destroy_proxy(proxy: Any) -> None:
    """Release a proxy made by `create_proxy`."""
    destroy = getattr(proxy, "destroy", None)
    if destroy is not None:
        destroy()


def jsnull() -> object:
    """JavaScript `null` as Pyodide shows it (`None` where there is none)."""
    return getattr(ffi(), "jsnull", None)


def to_python(value: Any, null: object) -> Any:
    """A plain Python value: `null`/`None` become `None`, JS objects and buffers are
    converted, dict subclasses (the SDK's `JsDict`) become dicts, lists are copied."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if value is null:
        return None
    if kind is memoryview or kind is bytearray:
        return bytes(value)
    if isinstance(value, dict):
        return {str(key): to_python(item, null) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_python(item, null) for item in value]
    to_bytes = getattr(value, "to_bytes", None)
    if callable(to_bytes) and is_js_proxy(value):
        return bytes(to_bytes())
    to_py = getattr(value, "to_py", None)
    if callable(to_py):
        return to_python(to_py(), null)
    return value


def row_of(values: Any, null: object) -> tuple[Any, ...]:
    """One row of `raw().toArray()` as a tuple of plain values."""
    return tuple(
        value
        if (kind := type(value)) is int or kind is str or kind is float or value is None
        else to_python(value, null)
        for value in values
    )


def js_list(value: Any) -> list[Any]:
    """A JavaScript array (or the list the wrapping SDK made of it) as a Python list."""
    if isinstance(value, list):
        return value
    return list(value.to_py())


def sql_bindings(bindings: Sequence[object], raw: bool) -> list[object]:
    """Bindings as the Workers SQL API stores them faithfully.

    `bool` becomes 0/1 (the API would store the text 'true'); `bytes` go through
    `to_js` when the SDK does not convert them (`raw`), else they are stored as the
    text "b'...'"; an int outside +/-(2**53 - 1) is refused before it reaches
    JavaScript, which cannot bind it exactly. A large int within that range is passed
    as the float of the same value: Pyodide would make 2**53 - 1 a BigInt, which the
    API refuses, and JavaScript numbers are bound as REAL whatever Python type they
    came from.
    """
    if len(bindings) > MAX_BINDINGS:
        raise ValueError(
            f"a query may have at most {MAX_BINDINGS} bindings (the Cloudflare SQL limit), "
            f"got {len(bindings)}"
        )
    converted: list[object] = []
    for index, value in enumerate(bindings):
        kind = type(value)
        if kind is str or kind is float or value is None:
            converted.append(value)
        elif kind is bool:
            converted.append(1 if value else 0)
        elif isinstance(value, int):
            if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
                raise ValueError(
                    f"binding {index} is an integer outside +/-(2**53 - 1), which Cloudflare's "
                    "SQL API cannot bind exactly; store it as TEXT"
                )
            converted.append(int(value) if -_INT32 <= value < _INT32 else float(value))
        elif isinstance(value, bytes | bytearray | memoryview):
            data = bytes(value)
            converted.append(ffi().to_js(data) if raw else data)
        elif isinstance(value, float):
            converted.append(float(value))
        elif isinstance(value, str):
            converted.append(str(value))
        else:
            raise TypeError(
                f"binding {index} must be None, bool, int, float, str or bytes, "
                f"got {type(value).__name__}"
            )
    return converted


def to_js_value(value: Any, raw: bool) -> Any:
    """A JSON value as JavaScript takes it on the raw SDK: dicts become plain objects and
    `None` inside them `null` (not `undefined`); the wrapping SDK converts them itself."""
    if not raw or not isinstance(value, dict | list):
        return value
    return ffi().to_js(_nulls(value, jsnull()), dict_converter=js().Object.fromEntries)


def _nulls(value: Any, null: object) -> Any:
    """`value` with every `None` inside replaced by JavaScript's `null`."""
    if value is None:
        return null
    if isinstance(value, dict):
        return {key: _nulls(item, null) for key, item in value.items()}
    if isinstance(value, list):
        return [_nulls(item, null) for item in value]
    return value
