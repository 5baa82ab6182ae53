"""The abort signal handed to every handler attempt.

An attempt's signal is aborted when the attempt times out or its record is cancelled or
purged. The engine also cancels a timed-out handler's task, but a handler that catches the
cancellation can keep running; the signal is how it learns that its outcome will be
ignored.
"""

from __future__ import annotations

import asyncio


class AbortSignal:
    """Read-only view of one attempt's cancellation: `aborted`, `reason`, `wait()`."""

    __slots__ = ("_event", "_reason")

    def __init__(self) -> None:
        self._event: asyncio.Event | None = None
        """Made by the first `wait()` only: most attempts never wait on their signal."""
        self._reason: BaseException | None = None

    @property
    def aborted(self) -> bool:
        """True once the attempt was aborted (timeout, cancel or purge)."""
        return self._reason is not None

    @property
    def reason(self) -> BaseException | None:
        """The error the attempt was aborted with, or `None` while it is not aborted."""
        return self._reason

    async def wait(self) -> BaseException | None:
        """Return the abort reason once the signal is aborted (immediately if it already is)."""
        if self._reason is None:
            if self._event is None:
                self._event = asyncio.Event()
            await self._event.wait()
        return self._reason

    def raise_if_aborted(self) -> None:
        """Raise the abort reason if the signal is aborted; do nothing otherwise."""
        if self._reason is not None:
            raise self._reason

    def _abort(self, reason: BaseException) -> None:
        """Abort with `reason`; a second abort keeps the first reason."""
        if self._reason is not None:
            return
        self._reason = reason
        if self._event is not None:
            self._event.set()

    def __repr__(self) -> str:
        return f"AbortSignal(aborted={self.aborted}, reason={self._reason!r})"


def abort(signal: AbortSignal, reason: BaseException) -> None:
    """Abort `signal` with `reason` (engine-internal: handlers only read signals)."""
    signal._abort(reason)
