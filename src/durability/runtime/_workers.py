"""The `workers` stand-in: Cloudflare's Python SDK names, answered by the embedded runtime.

A Cloudflare Python Worker starts with `from workers import DurableObject,
WorkerEntrypoint, WorkflowEntrypoint, Response, Request` (and `from workers.workflows
import NonRetryableError`). Off Cloudflare that SDK is not installed (it needs Pyodide),
so importing `durability.runtime` appends a finder to the very end of `sys.meta_path`
that answers the names `workers` and `workers.workflows` with these classes. Being last, it is
asked only after every other finder failed: where a real `workers` module can be
imported, that one wins.
"""

from __future__ import annotations

import asyncio
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import sys
from collections.abc import Awaitable, Sequence
from types import ModuleType
from typing import Any

from ._http import Request, Response
from ._object import DurableObject

__all__ = ["ExecutionContext", "WorkerEntrypoint", "install_workers_fallback"]

logger = logging.getLogger("durability.serve")

MODULE_NAME = "workers"
WORKFLOWS_MODULE = "workers.workflows"
_EXPORTS = ("DurableObject", "WorkerEntrypoint", "WorkflowEntrypoint", "Request", "Response")


class ExecutionContext:
    """A worker's `ctx`: `waitUntil(awaitable)` keeps work running after `fetch` returns.

    One per served project; `settle()` (at server shutdown) cancels what is still running.
    """

    def __init__(self) -> None:
        self._tasks: set[asyncio.Future[Any]] = set()

    def wait_until(self, awaitable: Awaitable[Any]) -> None:
        """Run `awaitable` (a coroutine or future) in the background; failures are logged."""
        task = asyncio.ensure_future(awaitable)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    waitUntil = wait_until

    def _done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("ctx.waitUntil work failed", exc_info=task.exception())

    async def settle(self) -> None:
        """Cancel the background work still running and wait for it to end."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class WorkerEntrypoint:
    """Base class of a project's `Default` entry point: `fetch(self, request)` serves HTTP.

    Built as `Default(ctx, env)` for each request, as on Cloudflare: `self.env` holds the
    bindings and `self.ctx` the worker's `ExecutionContext`.
    """

    def __init__(self, ctx: Any, env: Any) -> None:
        self.ctx = ctx
        self.env = env


class _Fallback(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `workers` (only that name) as a module made of the runtime's classes."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in (MODULE_NAME, WORKFLOWS_MODULE):
            return None
        return importlib.util.spec_from_loader(
            fullname, self, origin="durability.runtime", is_package=fullname == MODULE_NAME
        )

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        from .._errors import NonRetryableError
        from .._workflows.entrypoint import WorkflowEntrypoint

        if module.__name__ == WORKFLOWS_MODULE:
            module.__dict__.update(
                NonRetryableError=NonRetryableError, __all__=["NonRetryableError"]
            )
            module.__doc__ = "Stand-in for `workers.workflows`, provided by durability.runtime."
            return
        values: dict[str, object] = {
            "DurableObject": DurableObject,
            "WorkerEntrypoint": WorkerEntrypoint,
            "WorkflowEntrypoint": WorkflowEntrypoint,
            "Request": Request,
            "Response": Response,
        }
        module.__dict__.update(values, __all__=list(_EXPORTS))
        module.__doc__ = "Stand-in for Cloudflare's `workers` SDK, provided by durability.runtime."


_FALLBACK = _Fallback()


def install_workers_fallback() -> None:
    """Make `import workers` find the stand-in when nothing else provides it (idempotent)."""
    if _FALLBACK not in sys.meta_path:
        sys.meta_path.append(_FALLBACK)
