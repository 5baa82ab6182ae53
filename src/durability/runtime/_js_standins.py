"""`js` and `pyodide.ffi` stand-ins for what WebSocket code on Cloudflare imports.

A Durable Object serving WebSockets on Cloudflare writes `from js import WebSocketPair`
and passes tags through `pyodide.ffi.to_js` (workerd wants a JavaScript array there).
Neither module exists off Cloudflare, so, like the `workers` stand-in, a finder at the
very end of `sys.meta_path` answers these names: `js` with the runtime's
`WebSocketPair` and `WebSocketRequestResponsePair`, `pyodide.ffi` with `to_js` and
`create_proxy`, which have nothing to convert here and return their argument.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, TypeVar

from .._cloudflare._ffi import STANDIN
from ._websocket import WebSocketPair, WebSocketRequestResponsePair

__all__ = ["create_proxy", "install_js_fallback", "to_js"]

T = TypeVar("T")


def to_js(value: T, *args: Any, **options: Any) -> T:
    """`value` itself: values keep their Python types in the embedded runtime."""
    return value


def create_proxy(value: Callable[..., T], *args: Any, **options: Any) -> Callable[..., T]:
    """`value` itself: a Python callable needs no proxy to outlive a call here."""
    return value


_MODULES: dict[str, dict[str, object]] = {
    "js": {
        "WebSocketPair": WebSocketPair,
        "WebSocketRequestResponsePair": WebSocketRequestResponsePair,
    },
    "pyodide": {},
    "pyodide.ffi": {"to_js": to_js, "create_proxy": create_proxy},
}


class _Fallback(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `js`, `pyodide` and `pyodide.ffi` (only those) as the runtime's names."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _MODULES:
            return None
        package = fullname == "pyodide"
        return importlib.util.spec_from_loader(
            fullname, self, origin="durability.runtime", is_package=package
        )

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        names = _MODULES[module.__name__]
        module.__dict__.update(names, __all__=sorted(names), **{STANDIN: True})
        module.__doc__ = f"Stand-in for Cloudflare's `{module.__name__}`, from durability.runtime."


_FALLBACK = _Fallback()


def install_js_fallback() -> None:
    """Make `import js` and `import pyodide.ffi` find the stand-ins when nothing else
    provides them (idempotent)."""
    if _FALLBACK not in sys.meta_path:
        sys.meta_path.append(_FALLBACK)
