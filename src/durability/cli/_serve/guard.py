"""What `durability serve` refuses before a request reaches the worker or the dashboard.

`RequestGuard` wraps the ASGI app:

- a request whose `Host` is not this server (see `AllowedHosts`) gets 403, whatever
  its path: a page on a DNS name the attacker rebinds to 127.0.0.1 would otherwise
  read (and drive) everything a local page can;
- a request to `/_durability` that a browser marks as coming from another origin
  (`Origin` of another host or port, `Origin: null`, or `Sec-Fetch-Site` other than
  `same-origin` and `none`) gets 403: the dashboard and `advance` are for the page
  this server serves and for tools, which send no `Origin`;
- a body over `max_body_bytes` gets 413: a `Content-Length` over it before a byte of
  the body is read, a chunked body as soon as it passes the limit (so at most that
  much is ever held).

WebSocket handshakes get the same `Host` and `/_durability` origin checks (refused
with 403 before they are accepted).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from .._dashboard import Dashboard
from .accept_log import quiet_accept_errors
from .server import Message, Receive, Scope, Send

logger = logging.getLogger("durability.serve")

DEFAULT_MAX_BODY_BYTES = 100_000_000
"""Cloudflare's request body limit on its Free and Pro plans, "100 MB" (decimal: the
stricter reading, so a body served here is never one Cloudflare refuses)."""

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_SAME_ORIGIN_FETCHES = ("same-origin", "none")

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class AllowedHosts:
    """The `Host` names that reach this server, from its bound address and
    `--allowed-host` names (the port never matters: port mappings change it, and
    rebinding is about the name).

    - Bound to a loopback address (or `localhost`): `localhost` and any loopback
      address (127.0.0.1 and `[::1]` are the same server).
    - Bound to every interface (`0.0.0.0`, `::`): `localhost` and any IP address, the
      one a client dialled (no DNS name is involved, so nothing can be rebound).
    - Bound to another address: that address (the one the connection came in on).
    - Bound to a DNS name: that name.
    - Always: each `--allowed-host` name, in any case, with or without a final dot.
    """

    def __init__(self, bound: str, names: Iterable[str] = ()) -> None:
        self._names = {_normal(name) for name in names}
        address = _ip(_normal(bound))
        if address is None:
            self._names.add(_normal(bound))
        self._loopback = _normal(bound) == "localhost" or (
            address is not None and address.is_loopback
        )
        self._everywhere = address is not None and address.is_unspecified

    def allows(self, host: str | None, local_address: str | None) -> bool:
        """Whether a request with this `Host` value (`None`: none sent), arriving on
        `local_address`, is for this server."""
        name = _host_of(host) if host is not None else None
        if name is None:
            return False
        if name in self._names:
            return True
        address = _ip(name)
        if self._loopback:
            return name == "localhost" or (address is not None and address.is_loopback)
        if self._everywhere:
            return name == "localhost" or address is not None
        return address is not None and address == _ip(local_address or "")


class RequestGuard:
    """ASGI middleware refusing other hosts, cross-site dashboard requests and oversized
    bodies (see the module's docstring); the lifespan also quiets accept-error storms."""

    def __init__(self, app: Any, hosts: AllowedHosts, max_body_bytes: int) -> None:
        self.app = app
        self.hosts = hosts
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            quiet_accept_errors()
            await self.app(scope, receive, send)
            return
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            logger.warning(
                "refused %s %s: %s", scope.get("method", "WEBSOCKET"), scope["path"], refusal
            )
            await _refuse(kind, receive, send, 403, f"Forbidden: {refusal}\n")
            return
        if kind == "websocket":
            await self.app(scope, receive, send)
            return
        length = _header(scope, b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            await _refuse(kind, receive, send, 413, self._too_large())
            return
        messages = await self._body(receive)
        if messages is None:
            await _refuse(kind, receive, send, 413, self._too_large())
            return
        await self.app(scope, _replay(messages, receive), send)

    def _refusal(self, scope: Scope) -> str | None:
        """Why the request is refused, or `None`."""
        server = scope.get("server")
        host = _header(scope, b"host")
        if not self.hosts.allows(host, server[0] if server else None):
            return (
                f"Host {host!r} is not this server; start durability serve with "
                "--allowed-host NAME to answer to another name"
            )
        if not Dashboard.handles(scope["path"]):
            return None
        fetch_site = _header(scope, b"sec-fetch-site")
        if fetch_site is not None and fetch_site.lower() not in _SAME_ORIGIN_FETCHES:
            return f"a {fetch_site} request to /_durability (only this server's own pages)"
        origin = _header(scope, b"origin")
        if origin is not None and not _same_origin(origin, host or ""):
            return f"a request from {origin!r} to /_durability (only this server's own pages)"
        return None

    async def _body(self, receive: Receive) -> list[Message] | None:
        """The request's body messages, or `None` once they pass the limit."""
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                return messages
            size += len(message.get("body", b""))
            if size > self.max_body_bytes:
                return None
            if not message.get("more_body", False):
                return messages

    def _too_large(self) -> str:
        return f"Payload Too Large: the request body is over {self.max_body_bytes} bytes\n"


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A `receive` that gives `messages` first, then what `receive` gives."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


async def _refuse(kind: str, receive: Receive, send: Send, status: int, text: str) -> None:
    if kind == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.close", "code": 1008})
        return
    body = text.encode("utf-8")
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode("ascii")),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> str | None:
    """The first value of header `name` (lower case), or `None`."""
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def _same_origin(origin: str, host: str) -> bool:
    """Whether `Origin` names the host and port the request was sent to."""
    try:
        parts = urlsplit(origin)
        origin_port = parts.port
    except ValueError:
        return False
    default = _DEFAULT_PORTS.get(parts.scheme)
    origin_host = parts.hostname
    if origin_host is None or default is None:
        return False
    origin_port = origin_port or default
    name = _host_of(host)
    port = _port_of(host)
    return name == _normal(origin_host) and (port or origin_port) == origin_port


def _host_of(value: str) -> str | None:
    """The name in a `Host` value (no port, no brackets, normalized), `None` if malformed."""
    split = _split_host(value)
    return None if split is None else split[0]


def _port_of(value: str) -> int | None:
    split = _split_host(value)
    return None if split is None else split[1]


def _split_host(value: str) -> tuple[str, int | None] | None:
    text = value.strip()
    if text.startswith("["):
        end = text.find("]")
        name, rest = text[1:end], text[end + 1 :]
        if end < 0 or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:]
    else:
        name, _, port_text = text.partition(":") if text.count(":") == 1 else (text, "", "")
    if port_text and not port_text.isdigit():
        return None
    name = _normal(name)
    return (name, int(port_text) if port_text else None) if name else None


def _normal(name: str) -> str:
    """A host name as compared: lower case, without the final dot of a full name."""
    lowered = name.strip().lower()
    return lowered[:-1] if lowered.endswith(".") else lowered


def _ip(name: str) -> IpAddress | None:
    try:
        return ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return None
