"""The `pyodide`, `pyodide.ffi` and `pyodide.http` stand-ins.

`pyodide.ffi` has the names Worker code uses: `to_js` (its lists, dicts, sets and bytes
marked as JavaScript ones, still Python values, see `_js_containers`), `create_proxy`
(which gives back what it is given, as there is no JavaScript to hand it to),
`run_sync` (see `_run_sync`), `JsException` (the type the embedded runtime raises for
Cloudflare's errors), `JsProxy` and its kinds (for `isinstance` checks, which no local
value passes), `jsnull`, `IN_PYODIDE` (False).
`pyodide.http` has `pyfetch` (real outbound HTTP), `FetchResponse` and its errors.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from .._http import FetchResponse, Request
from .._js_containers import to_js
from .._js_errors import AbortError, BodyUsedError, HttpStatusError, JsException, js_error
from .._js_values import JsBigInt
from .._outbound import fetch
from ._run_sync import can_run_sync, run_sync

VERSION = "0.0.0+durability"
"""`pyodide.__version__` here: no real Pyodide version, so no version check matches."""


class JsProxy:
    """A JavaScript object as Pyodide shows it; no local value is one."""


class JsNull(JsProxy):
    """JavaScript's `null`: falsy, and not `None`."""

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "jsnull"


class ConversionError(Exception):
    """A value that cannot be converted between Python and JavaScript."""


jsnull = JsNull()


class PyProxy:
    """What `create_proxy(fn)` gives: calls `fn` until `destroy()`."""

    def __init__(self, target: Any) -> None:
        self._target = target
        self._destroyed = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._destroyed:
            raise js_error("Error", "Object has already been destroyed")
        return self._target(*args, **kwargs)

    def destroy(self) -> None:
        self._destroyed = True


def create_proxy(obj: Any, **options: Any) -> Any:
    """A proxy of a callable (with `destroy()`); any other value unchanged."""
    return PyProxy(obj) if callable(obj) else obj


def create_once_callable(obj: Callable[..., Any], **options: Any) -> PyProxy:
    """A proxy of `obj` (it may be called more than once here)."""
    return PyProxy(obj)


def destroy_proxies(proxies: Iterable[Any]) -> None:
    """`destroy()` each proxy."""
    for proxy in proxies:
        destroy = getattr(proxy, "destroy", None)
        if destroy is not None:
            destroy()


def register_js_module(name: str, module: Any) -> None:
    """Make `import name` give `module`."""
    sys.modules[name] = module


def unregister_js_module(name: str) -> None:
    """Undo `register_js_module(name, ...)`."""
    sys.modules.pop(name, None)


_PROXY_KINDS = (
    "JsArray", "JsAsyncGenerator", "JsAsyncIterable", "JsAsyncIterator", "JsBuffer",
    "JsCallable", "JsCallableDoubleProxy", "JsDomElement", "JsDoubleProxy", "JsFetchResponse",
    "JsGenerator", "JsIterable", "JsIterator", "JsMap", "JsMutableMap", "JsOnceCallable",
    "JsPromise", "JsTypedArray", "JsWeakRef",
)  # fmt: skip


def fill_ffi(module: ModuleType) -> None:
    """Fill in the `pyodide.ffi` stand-in."""
    kinds = {name: type(name, (JsProxy,), {"__module__": module.__name__}) for name in _PROXY_KINDS}
    module.__dict__.update(
        kinds,
        IN_PYODIDE=False,
        ConversionError=ConversionError,
        JsBigInt=JsBigInt,
        JsException=JsException,
        JsNull=JsNull,
        JsProxy=JsProxy,
        can_run_sync=can_run_sync,
        create_once_callable=create_once_callable,
        create_proxy=create_proxy,
        destroy_proxies=destroy_proxies,
        jsnull=jsnull,
        register_js_module=register_js_module,
        run_sync=run_sync,
        to_js=to_js,
        unregister_js_module=unregister_js_module,
    )


async def pyfetch(request: Request | str, /, **kwargs: Any) -> FetchResponse:
    """`fetch(request, **kwargs)`, as `pyodide.http.pyfetch` (a `FetchResponse`)."""
    kwargs.pop("fetcher", None)
    kwargs.pop("signal", None)
    return await fetch(request, **kwargs)


def fill_http(module: ModuleType) -> None:
    """Fill in the `pyodide.http` stand-in."""
    module.__dict__.update(
        AbortError=AbortError,
        BodyUsedError=BodyUsedError,
        FetchResponse=FetchResponse,
        HttpStatusError=HttpStatusError,
        pyfetch=pyfetch,
    )


def fill_pyodide(module: ModuleType) -> None:
    """Fill in the `pyodide` stand-in (a package: `pyodide.ffi`, `pyodide.http`)."""
    module.__dict__.update(__version__=VERSION)
