"""Stand-ins for the `js` and `pyodide.ffi` modules a Cloudflare Python Worker sees.

Only the surface the Cloudflare double and the adapter use: `JsProxy` (raw JavaScript
objects), `jsnull`, `JsException`, `to_js`, `create_proxy`, `create_once_callable`,
`js.Promise.new` and `js.Object.fromEntries`. Like Pyodide, a proxy made by
`create_proxy` works until `destroy()`, and a JavaScript array's `to_py()` converts
deeply but leaves `jsnull` in place.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Callable, Generator
from typing import Any


class JsProxy:
    """A raw JavaScript object as Pyodide shows it to Python."""

    def __getitem__(self, key: object) -> Any:
        raise TypeError("'pyodide.ffi.JsProxy' object is not subscriptable")


class JsNull(JsProxy):
    """JavaScript `null`: falsy, and not `None`."""

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "jsnull"


jsnull = JsNull()


class JsException(Exception):
    """A JavaScript error raised into Python."""


class JsArray(JsProxy):
    """A JavaScript array; `to_py()` gives a list (nested arrays and objects converted)."""

    def __init__(self, items: list[Any]) -> None:
        self._items = items

    def __iter__(self) -> Any:
        return iter(self._items)

    @property
    def length(self) -> int:
        return len(self._items)

    def to_py(self) -> list[Any]:
        return [deep_py(item) for item in self._items]


class JsObject(JsProxy):
    """A plain JavaScript object: attribute access, `to_py()` gives a dict."""

    def __init__(self, entries: dict[str, Any]) -> None:
        self.__dict__["_entries"] = entries

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_entries"][name]
        except KeyError:
            return None  # JavaScript `undefined`

    def to_py(self) -> dict[str, Any]:
        return {key: deep_py(value) for key, value in self.__dict__["_entries"].items()}


class ArrayBuffer(JsProxy):
    """A JavaScript ArrayBuffer (a BLOB read under the built-in SDK)."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def to_bytes(self) -> bytes:
        return self._data

    def to_py(self) -> memoryview:
        return memoryview(self._data)


class Uint8Array(ArrayBuffer):
    """What `to_js(bytes)` gives: a typed array JavaScript binds as a BLOB."""


def deep_py(value: Any) -> Any:
    """`to_py()` of a nested value (JavaScript `null` stays `jsnull`)."""
    if isinstance(value, JsArray | JsObject | ArrayBuffer):
        return value.to_py()
    return value


def to_js(value: Any, dict_converter: Any = None) -> Any:
    """Python to JavaScript: bytes become a Uint8Array, dicts and lists JS objects."""
    if isinstance(value, bytes | bytearray | memoryview):
        return Uint8Array(bytes(value))
    if isinstance(value, dict):
        return JsObject({str(k): to_js(v, dict_converter) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return JsArray([to_js(v, dict_converter) for v in value])
    return value


class PyProxy(JsProxy):
    """A JavaScript function calling a Python callable, valid until destroyed."""

    def __init__(self, fn: Callable[..., Any], once: bool = False) -> None:
        self._fn: Callable[..., Any] | None = fn
        self._once = once

    @property
    def destroyed(self) -> bool:
        return self._fn is None

    def destroy(self) -> None:
        if self._fn is None:
            raise JsException("Error: Object has already been destroyed")
        self._fn = None

    def __call__(self, *args: Any) -> Any:
        fn = self._fn
        if fn is None:
            raise JsException("Error: This borrowed proxy was automatically destroyed")
        if self._once:
            self._fn = None
        return fn(*args)


def create_proxy(fn: Callable[..., Any]) -> PyProxy:
    return PyProxy(fn)


def create_once_callable(fn: Callable[..., Any]) -> PyProxy:
    return PyProxy(fn, once=True)


class JsPromise(JsProxy):
    """A JavaScript promise: awaitable from Python, settled by JavaScript or Python."""

    def __init__(self) -> None:
        self._future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    @classmethod
    def new(cls, executor: Callable[[Any, Any], None]) -> JsPromise:
        promise = cls()
        executor(promise._resolve, promise._reject)
        return promise

    def _resolve(self, value: Any = None) -> None:
        if not self._future.done():
            self._future.set_result(value)

    def _reject(self, error: Any = None) -> None:
        if not self._future.done():
            self._future.set_exception(JsException(f"Error: {error}"))

    @property
    def settled(self) -> bool:
        return self._future.done()

    def __await__(self) -> Generator[Any, None, Any]:
        return self._future.__await__()


class JsTask(JsProxy):
    """The promise a JavaScript async method returns, settled by the work it wraps."""

    def __init__(self, work: Any) -> None:
        self._work = work

    def __await__(self) -> Generator[Any, None, Any]:
        return (yield from self._work.__await__())


class JsDate(JsProxy):
    """A JavaScript Date (what the wrapping SDK makes of a datetime)."""

    def __init__(self, ms: float) -> None:
        self._ms = ms

    def getTime(self) -> float:
        return self._ms


class _Object:
    """`js.Object`: only `fromEntries`, the `dict_converter` Workers code passes."""

    fromEntries = staticmethod(lambda entries: entries)


def modules() -> dict[str, types.ModuleType]:
    """`js`, `pyodide` and `pyodide.ffi` modules to put in `sys.modules`."""
    ffi = types.ModuleType("pyodide.ffi")
    for name, value in {
        "JsProxy": JsProxy,
        "JsNull": JsNull,
        "JsException": JsException,
        "jsnull": jsnull,
        "to_js": to_js,
        "create_proxy": create_proxy,
        "create_once_callable": create_once_callable,
    }.items():
        setattr(ffi, name, value)
    pyodide = types.ModuleType("pyodide")
    pyodide.ffi = ffi  # type: ignore[attr-defined]
    js = types.ModuleType("js")
    js.Promise = JsPromise  # type: ignore[attr-defined]
    js.Object = _Object  # type: ignore[attr-defined]
    return {"js": js, "pyodide": pyodide, "pyodide.ffi": ffi}
