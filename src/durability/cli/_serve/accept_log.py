"""Accept errors said once per interval instead of once per failure.

When the process is out of file descriptors (or the system out of buffers), asyncio's
`accept()` fails, and it reports every failure with a traceback: as many as the listen
backlog each time the socket is readable again (uvicorn's is 2,048), every second, for
as long as it lasts. A flood of connections turned that into hundreds of megabytes of
log within a minute. `quiet_accept_errors` puts an exception handler on the running
loop that logs the first such failure, then at most one line per
`ACCEPT_LOG_INTERVAL_S` saying how many followed; everything else goes to the handler
that was there before.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from typing import Any

logger = logging.getLogger("durability.serve")

ACCEPT_LOG_INTERVAL_S = 10.0
"""The least time between two log lines about failing accepts."""

_RESOURCE_ERRORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


class Throttle:
    """Says when a repeated event is due to be logged: the first time, then at most once
    per `interval_s`, with how many went unsaid in between."""

    def __init__(self, interval_s: float = ACCEPT_LOG_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self._said_at: float | None = None
        self._unsaid = 0

    def due(self) -> tuple[bool, int]:
        """`(True, unsaid)` when the event should be logged now, else `(False, 0)`."""
        now = time.monotonic()
        if self._said_at is not None and now - self._said_at < self.interval_s:
            self._unsaid += 1
            return False, 0
        unsaid, self._unsaid, self._said_at = self._unsaid, 0, now
        return True, unsaid


class AcceptErrorLog:
    """A loop exception handler: accept failures for want of resources are logged
    through a `Throttle`; other contexts go to `previous` (or the loop's default)."""

    def __init__(self, previous: Any) -> None:
        self._previous = previous
        self._throttle = Throttle()

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        message = str(context.get("message", ""))
        if not (
            "accept" in message and isinstance(error, OSError) and error.errno in _RESOURCE_ERRORS
        ):
            if self._previous is not None:
                self._previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        said, unsaid = self._throttle.due()
        if not said:
            return
        logger.error(
            "accepting connections failed: %s%s; new connections wait until descriptors "
            "are free (said at most every %g s)",
            error.strerror or error,
            f" ({unsaid} more failures since the last report)" if unsaid else "",
            self._throttle.interval_s,
        )


def quiet_accept_errors() -> None:
    """Put an `AcceptErrorLog` on the running loop (once)."""
    loop = asyncio.get_running_loop()
    current = loop.get_exception_handler()
    if not isinstance(current, AcceptErrorLog):
        loop.set_exception_handler(AcceptErrorLog(current))
