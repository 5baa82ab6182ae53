"""`crash_point()`: crash an object in the middle of its own call, for tests.

`Runtime.crash(stub)` crashes an object between calls; the window that matters most for
at-least-once code is inside a handler, after an effect and before its record is
committed. `crash_point()` crashes there: the object whose call, alarm or durable handler
is running (found through the task context, so a fake binding awaited by the handler can
call it too) loses its uncommitted writes and its live instance, exactly as `crash` does.
"""

from __future__ import annotations

import asyncio
from typing import NoReturn


async def crash_point() -> NoReturn:
    """Crash the object whose call, alarm or handler is running, here and now.

    Writes the object made but did not commit yet are lost, its live instance is dropped
    and every task of it is cancelled, this one included, so the code after
    `await crash_point()` never runs. Callers of the call in flight get
    `ObjectEvictedError`; the next call or alarm builds a new instance from what was
    committed, and durable operations and named alarms interrupted here are retried.
    Works on the embedded `Runtime` only: elsewhere (no object running in this task, or
    on Cloudflare) it raises `RuntimeError`.
    """
    from .runtime._instance import Instance, running_instance

    instance = running_instance()
    if not isinstance(instance, Instance) or instance.gone:
        raise RuntimeError(
            "crash_point() must be awaited inside a call, alarm or durable handler of an "
            "object hosted by a durability Runtime"
        )
    instance.host.crash(instance)
    await asyncio.sleep(0)  # the crash cancelled this task: CancelledError is raised here
    raise AssertionError("crash_point(): the crashed object's task was not cancelled")
