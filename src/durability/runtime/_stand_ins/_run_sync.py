"""`pyodide.ffi.run_sync` and `can_run_sync` as Worker code meets them on Cloudflare.

There, inside a handler (where JavaScript promise integration is on), `run_sync(aw)`
blocks until `aw` is done and gives its result; at import time there is no suspender.
Here the awaitable runs to its end on a private event loop in a helper thread while the
caller waits (this module runs only off Cloudflare): sleeping, `fetch` and an object's
storage work there; what is bound to the worker's own event loop (asyncio locks,
queues and futures made there) raises `RuntimeError` saying so, where on Cloudflare it
works.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import Any

__all__ = ["can_run_sync", "run_sync"]

_OTHER_LOOP = ("different event loop", "attached to a different loop", "same thread")
"""Words of the errors an awaitable bound to the worker's loop raises on another one."""


def can_run_sync() -> bool:
    """Whether `run_sync` can block here: inside a handler (on a running event loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_sync(awaitable: Awaitable[Any]) -> Any:
    """Wait for `awaitable` and return its result (or raise its exception); outside a
    handler `RuntimeError("No suspender")`, as in Pyodide's global scope."""
    if not can_run_sync():
        close = getattr(awaitable, "close", None)
        if close is not None:
            close()
        raise RuntimeError("No suspender")
    outcome: list[Any] = []

    async def wait() -> Any:
        return await awaitable

    def run() -> None:
        try:
            outcome.append((True, asyncio.run(wait())))
        except BaseException as error:
            outcome.append((False, error))

    helper = threading.Thread(target=run, name="durability-run-sync")
    helper.start()
    helper.join()
    done, value = outcome[0]
    if done:
        return value
    if isinstance(value, RuntimeError | ValueError) and any(w in str(value) for w in _OTHER_LOOP):
        raise RuntimeError(
            "run_sync ran this awaitable on its own event loop (off Cloudflare), where the "
            f"worker's objects, storage and WebSockets cannot be used: {value}"
        ) from value
    raise value
