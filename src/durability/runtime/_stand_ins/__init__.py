"""Stand-ins for the modules a Cloudflare Python Worker imports: `workers`, `js`, `pyodide`.

A Worker's code starts with `from workers import DurableObject, Response` and may use
`js` (the JavaScript global scope) and `pyodide.ffi`. Off Cloudflare none of them can be
installed (they need Pyodide), so `install_stand_ins()` appends a finder to the very end
of `sys.meta_path` that answers those names with the embedded runtime's classes. Being
last, it is asked only after every other finder failed: where a real module of that name
can be imported, that one wins. Values keep Python semantics here, and the conversions
that cross into JavaScript on Cloudflare (`to_js`, `python_to_rpc`) give them back as
they are.

Each stand-in module is built by a function registered in `STAND_INS` under its name;
`workers` and `pyodide` are packages, so more submodules can be registered.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

from ..._types import STAND_IN_MARK
from ._js_module import fill_js
from ._pyodide_module import fill_ffi, fill_http, fill_pyodide
from ._workers_module import fill_entrypoints, fill_rpc, fill_workers, fill_workflows

__all__ = ["STAND_INS", "install_stand_ins", "is_stand_in"]

STAND_INS: dict[str, Callable[[ModuleType], None]] = {
    "workers": fill_workers,
    "workers.entrypoints": fill_entrypoints,
    "workers.rpc": fill_rpc,
    "workers.workflows": fill_workflows,
    "js": fill_js,
    "pyodide": fill_pyodide,
    "pyodide.ffi": fill_ffi,
    "pyodide.http": fill_http,
}
"""Each stand-in module's name, and the function that fills it in."""

PACKAGES = frozenset({"workers", "pyodide"})
MARK = STAND_IN_MARK


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the names of `STAND_INS` (and only those) as modules the runtime fills in."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in STAND_INS:
            return None
        return importlib.util.spec_from_loader(
            fullname, self, origin="durability.runtime", is_package=fullname in PACKAGES
        )

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        setattr(module, MARK, True)
        STAND_INS[module.__name__](module)


_FINDER = _Finder()


def install_stand_ins() -> None:
    """Make `import workers` (and `js`, `pyodide`) find the stand-ins when nothing else
    provides them (idempotent)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)


def is_stand_in(module: object) -> bool:
    """Whether `module` is one of these stand-ins (not the real Pyodide or SDK)."""
    return bool(getattr(module, MARK, False))
