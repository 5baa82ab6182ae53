"""The connections `durability serve` keeps: a cap on how many, a deadline for headers.

uvicorn holds a connection that never completes a request for as long as the client
keeps it: 1,100 such half-open connections took every descriptor of a process limited
to 1,024, and every real request timed out. So the HTTP protocol here (uvicorn's h11
protocol, with two additions) gives each request `header_timeout_s` from the moment
the connection opens, or the previous response ends, to finish its headers, and
keeps at most `max_connections` open: past it, the connection that has waited longest
without a request in progress is closed to make room (a new one is refused only when
every open connection is busy with a request). Idle keep-alive connections close
after `KEEP_ALIVE_TIMEOUT_S`, as uvicorn's do.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from ...runtime._limits import FDS_PER_OBJECT
from .accept_log import Throttle

logger = logging.getLogger("durability.serve")

DEFAULT_HEADER_TIMEOUT_S = 10.0
KEEP_ALIVE_TIMEOUT_S = 5
MAX_HEADER_BYTES = 128_000
"""The request line and headers together at most: Cloudflare's 128 KB."""
MIN_DEFAULT_CONNECTIONS = 16
MAX_DEFAULT_CONNECTIONS = 1_000


def default_max_connections() -> int:
    """The connection cap when none is given: an eighth of the open-file limit (object
    files take three quarters, at `FDS_PER_OBJECT` each), between 16 and 1,000."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        unlimited = resource.RLIM_INFINITY
    except (ImportError, OSError, ValueError):
        return 256
    if soft == unlimited or soft <= 0:
        return MAX_DEFAULT_CONNECTIONS
    return max(MIN_DEFAULT_CONNECTIONS, min(MAX_DEFAULT_CONNECTIONS, soft // (2 * FDS_PER_OBJECT)))


def guarded_protocol(max_connections: int, header_timeout_s: float) -> type[H11Protocol]:
    """An h11 protocol class for one server: the connections it opens share the cap."""
    open_connections: dict[H11Protocol, None] = {}
    """Every open connection, oldest first."""
    refusals = Throttle()

    class GuardedH11Protocol(H11Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            open_connections[self] = None
            self.await_headers()
            if len(open_connections) > max_connections:
                self.make_room()

        def connection_lost(self, exc: Exception | None) -> None:
            super().connection_lost(exc)
            self.stop_header_timer()
            open_connections.pop(self, None)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:
                self.stop_header_timer()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self.await_headers()

        def handle_websocket_upgrade(self, event: h11.Request) -> None:
            self.stop_header_timer()
            open_connections.pop(self, None)
            super().handle_websocket_upgrade(event)

        def idle(self) -> bool:
            """No request in progress: waiting for one, or for the rest of its headers."""
            return (
                self.conn.their_state is h11.IDLE
                and (self.cycle is None or self.cycle.response_complete)
                and not self.transport.is_closing()
            )

        def make_room(self) -> None:
            """Close the connection idle the longest, or this one if none is idle."""
            for connection in open_connections:
                if (
                    connection is not self
                    and isinstance(connection, GuardedH11Protocol)
                    and connection.idle()
                ):
                    connection.transport.close()
                    return
            said, unsaid = refusals.due()
            if said:
                logger.warning(
                    "refusing connections: all %d open ones are busy with requests "
                    "(--max-connections)%s",
                    max_connections,
                    f"; {unsaid} more refused since the last report" if unsaid else "",
                )
            self.transport.close()

        def await_headers(self) -> None:
            """Give the next request `header_timeout_s` to finish its headers."""
            self.stop_header_timer()
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.header_timer = self.loop.call_later(header_timeout_s, self.headers_late)

        def headers_late(self) -> None:
            self.header_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

        def stop_header_timer(self) -> None:
            timer, self.header_timer = self.header_timer, None
            if timer is not None:
                timer.cancel()

    return GuardedH11Protocol
