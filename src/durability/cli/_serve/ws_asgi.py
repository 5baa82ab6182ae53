"""WebSocket connections under `durability serve`: ASGI `websocket` scopes.

The upgrade request goes to the worker's `fetch` as any request (with its `Upgrade:
websocket` header). A `101` response with a `web_socket` accepts the connection, and
the client end of that WebSocket is then the network's: what the worker's end sends
goes out as frames, what the client sends arrives at the worker's end, and a close from
either side reaches the other. Any other response is sent back as the handshake's HTTP
answer (when the server supports that ASGI extension; otherwise the handshake is
refused with 403).

A client's close frame reaches the worker's end as a close event; under `durability
serve` (whose protocol has the `HALF_CLOSE` extension, see `ws_protocol`) the
connection then stays open as on workerd: what that end still sends goes out, and the
close frame the client gets back is the one it sends when it closes, with its code and
reason. An end that goes away without closing (1006) drops the connection without a
close frame. Under a server without the extension, the server answers the close frame
itself and what the worker's end sends afterwards is dropped. A connection lost
without a close frame is reported as 1006, as workerd does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ...runtime._http import FetchResponse, Request, Response
from ...runtime._websocket import WebSocket
from ...runtime._ws_events import (
    ABNORMAL_CLOSE,
    ABNORMAL_REASON,
    NO_STATUS,
    BinaryMessage,
    CloseEvent,
    ErrorEvent,
    MessageEvent,
    SocketEvent,
)

__all__ = ["ABORT", "HALF_CLOSE", "HALF_CLOSED", "serve_websocket"]

HALF_CLOSE = "durability.websocket.half_close"
"""The scope extension of a server that leaves the answer to a client's close frame to
the app: it marks that `websocket.disconnect` with `HALF_CLOSED`, and still carries
the app's messages until the app's `websocket.close` (or `ABORT`)."""

HALF_CLOSED = "durability.half_closed"
"""Set on the `websocket.disconnect` of a client's close frame left unanswered."""

ABORT = "durability.websocket.abort"
"""The message that ends a connection without a close frame."""

logger = logging.getLogger("durability.serve")

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_HANDSHAKE_HEADERS = frozenset(
    {
        "connection",
        "upgrade",
        "content-length",
        "sec-websocket-accept",
        "sec-websocket-extensions",
        "sec-websocket-protocol",
    }
)
"""Headers the server writes itself in its 101 answer."""


async def serve_websocket(
    scope: MutableMapping[str, Any],
    receive: Receive,
    send: Send,
    url: str,
    respond: Callable[[Request], Awaitable[FetchResponse]],
) -> None:
    """Serve one ASGI `websocket` scope: ask the worker (`respond`), then carry frames."""
    if (await receive())["type"] != "websocket.connect":
        return
    http_url = "http" + url[2:] if url.startswith("ws") else url
    request = Request(
        http_url,
        method="GET",
        headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]],
    )
    response = await respond(request)
    client = response.web_socket if isinstance(response, Response) else None
    if client is not None and client._taken_by is not None:
        logger.error("fetch answered 101 with a WebSocket end that was already accepted")
        response = Response(b"Internal Server Error", status=500)
        client = None
    if response.status != 101 or client is None:
        await _answer_http(scope, send, response)
        return
    connection = _Connection(client, send, HALF_CLOSE in scope.get("extensions", {}))
    await send(
        {
            "type": "websocket.accept",
            "subprotocol": response.headers.get("sec-websocket-protocol"),
            "headers": [
                (name.encode("latin-1"), value.encode("latin-1"))
                for name, value in response.headers.items()
                if name not in _HANDSHAKE_HEADERS
            ],
        }
    )
    client._take("network", connection.outgoing)
    writer = asyncio.ensure_future(connection.write())
    try:
        await connection.read(receive)
    finally:
        connection.stop()
        await writer


async def _answer_http(
    scope: MutableMapping[str, Any], send: Send, response: FetchResponse
) -> None:
    """Refuse the upgrade with the worker's own HTTP answer, when the server can send it."""
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1000})
        return
    content = await response.content()
    lines = response.header_lines
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in lines]
    if not any(name.lower() == "content-length" for name, _ in lines):
        headers.append((b"content-length", str(len(content)).encode("latin-1")))
    await send(
        {"type": "websocket.http.response.start", "status": response.status, "headers": headers}
    )
    await send({"type": "websocket.http.response.body", "body": content})


class _Connection:
    """One accepted connection: the client end of the worker's WebSocket, on the wire."""

    def __init__(self, client: WebSocket, send: Send, half_close: bool) -> None:
        self._client = client
        self._send = send
        self._half_close = half_close
        self._queue: asyncio.Queue[Message | None] = asyncio.Queue()
        self._gone = False

    def outgoing(self, event: SocketEvent) -> None:
        """What the worker's end sent: queued for the wire, in order."""
        if self._gone:
            return
        if isinstance(event, MessageEvent):
            if isinstance(event.data, str):
                self._queue.put_nowait({"type": "websocket.send", "text": event.data})
            elif isinstance(event.data, BinaryMessage):
                self._queue.put_nowait({"type": "websocket.send", "bytes": bytes(event.data)})
        elif isinstance(event, CloseEvent) and event.code == ABNORMAL_CLOSE:
            # The worker's end went away without closing: no close frame can say so.
            self._queue.put_nowait(
                {"type": ABORT}
                if self._half_close
                else {"type": "websocket.close", "code": 1011, "reason": ""}
            )
        elif isinstance(event, CloseEvent):
            code = 1000 if event.code == NO_STATUS else event.code
            self._queue.put_nowait(
                {"type": "websocket.close", "code": code, "reason": event.reason}
            )

    async def write(self) -> None:
        """Send what was queued until the connection closes or fails."""
        while True:
            message = await self._queue.get()
            if message is None or self._gone:
                return
            try:
                await self._send(message)
            except Exception as error:
                self._gone = True
                logger.info("WebSocket connection failed while sending: %r", error)
                if self._client._peer is not None:
                    self._client._peer._receive(ErrorEvent(error))
                return
            if message["type"] in ("websocket.close", ABORT):
                return

    async def read(self, receive: Receive) -> None:
        """Deliver what the client sends to the worker's end, until it disconnects."""
        while True:
            message = await receive()
            kind = message["type"]
            if kind == "websocket.receive":
                text = message.get("text")
                data = text if text is not None else BinaryMessage(message.get("bytes") or b"")
                if not self._client._close_sent:
                    self._client.send(data)
            elif kind == "websocket.disconnect" and message.get(HALF_CLOSED):
                # The client closed; the connection waits for the worker's end to close.
                code = int(message.get("code", NO_STATUS))
                self._client._close_with(CloseEvent(code, message.get("reason") or "", True))
            elif kind == "websocket.disconnect":
                self._gone = True
                code = int(message.get("code", NO_STATUS))
                if "reason" not in message and code in (NO_STATUS, ABNORMAL_CLOSE):
                    event = CloseEvent(ABNORMAL_CLOSE, ABNORMAL_REASON, False)
                else:
                    event = CloseEvent(code, message.get("reason") or "", True)
                self._client._close_with(event)
                return

    def stop(self) -> None:
        """Let the writer end (after what it has queued)."""
        self._gone = True
        self._queue.put_nowait(None)
