"""The uvicorn server `durability serve` runs: the worker app behind `RequestGuard`, on
the guarded h11 protocol, with its limits (see `guard` and `connections`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import uvicorn

from .connections import (
    DEFAULT_HEADER_TIMEOUT_S,
    KEEP_ALIVE_TIMEOUT_S,
    MAX_HEADER_BYTES,
    default_max_connections,
    guarded_protocol,
)
from .guard import DEFAULT_MAX_BODY_BYTES, AllowedHosts, RequestGuard
from .server import WorkerApp
from .virtual_server import VirtualTimeServer
from .ws_protocol import WorkerWSProtocol

MAX_BACKLOG = 2_048
"""uvicorn's default listen backlog, the most used."""


@dataclass(frozen=True)
class ServeLimits:
    """What `durability serve` accepts: other `Host` names, body size, connections."""

    allowed_hosts: Sequence[str] = ()
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_connections: int = field(default_factory=default_max_connections)
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S


def build_server(
    app: WorkerApp, host: str, port: int, limits: ServeLimits, *, virtual_time: bool
) -> uvicorn.Server:
    """A uvicorn server for `app` on `host:port` within `limits`; on `virtual_time`, one
    that stops the app itself (see `VirtualTimeServer`) on a stdlib loop."""
    guarded = RequestGuard(app, AllowedHosts(host, limits.allowed_hosts), limits.max_body_bytes)
    config = uvicorn.Config(
        guarded,
        host=host,
        port=port,
        lifespan="on",
        http=guarded_protocol(limits.max_connections, limits.header_timeout_s),
        timeout_keep_alive=KEEP_ALIVE_TIMEOUT_S,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        # asyncio accepts up to `backlog` connections each time the socket is ready,
        # before the cap can close any: more than the cap would only take descriptors.
        backlog=min(MAX_BACKLOG, limits.max_connections),
        # The virtual clock drives a stdlib selector loop: never uvloop.
        loop="asyncio" if virtual_time else "auto",
        ws=WorkerWSProtocol,
        # Keepalive pings would run on virtual time too: advancing it would time out
        # every WebSocket client, so under it there are none.
        ws_ping_interval=None if virtual_time else 20.0,
        ws_ping_timeout=None if virtual_time else 20.0,
    )
    return VirtualTimeServer(config, app) if virtual_time else uvicorn.Server(config)
