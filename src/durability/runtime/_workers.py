"""The worker side of a served project: its `ctx`, `WorkerEntrypoint`, and the env and
`waitUntil` that `workers.env` / `workers.wait_until` reach from anywhere.

On Cloudflare, `from workers import env, wait_until` gives the running worker's bindings
and background work wherever they are used (even at import time). Here the worker that
`durability serve` serves (`serve_worker`) plays that part; `patch_env(...)` lays values
over its env for the duration of a `with` block.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

logger = logging.getLogger("durability.serve")

__all__ = ["CurrentEnv", "ExecutionContext", "WorkerEntrypoint", "patch_env", "serve_worker"]


class ExecutionContext:
    """A worker's `ctx`: `waitUntil(awaitable)` keeps work running after `fetch` returns.

    One per served project; `settle()` (at server shutdown) cancels what is still running.
    """

    def __init__(self) -> None:
        self._tasks: set[asyncio.Future[Any]] = set()

    def wait_until(self, awaitable: Awaitable[Any]) -> None:
        """Run `awaitable` (a coroutine or future) in the background; failures are logged.
        A value that is not awaitable is ignored, as on Cloudflare."""
        if not isinstance(awaitable, Awaitable):
            return
        task = asyncio.ensure_future(awaitable)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    waitUntil = wait_until

    def passThroughOnException(self) -> None:
        """Cloudflare's fail-open switch; there is no origin behind `serve`, so a no-op."""

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


_served: list[tuple[Any, ExecutionContext]] = []
"""The worker being served: its env and ctx (the last one `serve_worker` was given)."""

_importing: list[Mapping[str, Any]] = []
"""The `vars` of the project being imported, if one is: its env before it is served."""

_patches: ContextVar[tuple[Mapping[str, Any], ...]] = ContextVar(
    "durability_env_patches", default=()
)


def serve_worker(env: Any, context: ExecutionContext) -> None:
    """Make `env` and `context` the ones `workers.env` and `workers.wait_until` reach."""
    _served[:] = [(env, context)]


@contextmanager
def importing_with(values: Mapping[str, Any]) -> Iterator[None]:
    """While a project's entry module is imported (before it can be served), let
    `workers.env` give its `vars`, as Cloudflare gives the env at import time."""
    _importing.append(values)
    try:
        yield
    finally:
        _importing.pop()


def served_context() -> ExecutionContext:
    """The served worker's `ctx` (a detached one before any worker is served)."""
    if not _served:
        _served.append((None, ExecutionContext()))
    return _served[0][1]


class CurrentEnv:
    """`workers.env`: the served worker's bindings (with `patch_env` values on top)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        for patch in reversed(_patches.get()):
            if name in patch:
                return patch[name]
        if _importing:
            if name in _importing[-1]:
                return _importing[-1][name]
            raise AttributeError(name)
        env = _served[0][0] if _served else None
        if env is None:
            raise AttributeError(name)
        return getattr(env, name)

    def __dir__(self) -> list[str]:
        env = _served[0][0] if _served else None
        names = set(dir(env)) if env is not None else set()
        for patch in _patches.get():
            names.update(patch)
        return sorted(name for name in names if not name.startswith("_"))

    def __repr__(self) -> str:
        return "workers.env"


@contextmanager
def patch_env(
    d: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None, **kwds: Any
) -> Iterator[None]:
    """Within the block, `workers.env.NAME` gives these values instead of the bindings."""
    values = dict(d or {}) | kwds
    token = _patches.set((*_patches.get(), values))
    try:
        yield
    finally:
        _patches.reset(token)
