"""The uvicorn server behind `durability serve --virtual-time`.

uvicorn's main loop and its shutdown pace themselves with `asyncio.sleep`, which a
`VirtualClock` holds until someone advances it: a plain `uvicorn.Server` on virtual
time would never notice Ctrl-C. This one waits for the exit signal itself and then
stops the app (settling the worker and closing the runtime, which gives the loop back
its real time) before uvicorn's own shutdown runs.
"""

from __future__ import annotations

import asyncio
import logging
from types import FrameType

import uvicorn

from .server import WorkerApp

logger = logging.getLogger("durability.serve")


class VirtualTimeServer(uvicorn.Server):
    """A `uvicorn.Server` for a `WorkerApp` whose runtime runs on a `VirtualClock`."""

    def __init__(self, config: uvicorn.Config, app: WorkerApp) -> None:
        super().__init__(config)
        self._app = app
        self._loop: asyncio.AbstractEventLoop | None = None
        self._exit: asyncio.Event | None = None

    async def main_loop(self) -> None:
        """Serve until asked to exit, then stop the app while the loop is still virtual."""
        self._exit = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        await self.on_tick(0)
        if not self.should_exit:
            await self._exit.wait()
        try:
            await self._app.stop()
        except Exception:
            logger.exception("runtime failed to close")

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """Note the signal as uvicorn does, and wake `main_loop` (no timer would)."""
        super().handle_exit(sig, frame)
        if self._loop is not None and self._exit is not None:
            self._loop.call_soon_threadsafe(self._exit.set)
