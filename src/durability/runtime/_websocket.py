"""WebSockets as a Worker sees them: `WebSocketPair()` makes two connected ends.

A Worker or a Durable Object keeps one end (the "server" end) and hands the other to
the client in `Response(None, status=101, web_socket=client)`. What one end sends, the
other receives. An end delivers what it receives only once something takes it: its own
`accept()` (events to listeners, the standard API), `ctx.acceptWebSocket(ws)` (the
Durable Object's handlers, the Hibernation API, see `_hibernation`), or the HTTP server
(the network, see `_ws_asgi`); until then messages wait, in order.

Behaviour follows workerd (measured on a local workerd with both Python SDKs): sending
before either accept raises, sending after `close()` raises, a close code must be 1000
to 4999 and not 1004 to 1006 or 1015, and an end stays open until both sides closed
(it may still send once the peer closed, until it closes too). From compatibility date
2026-04-07 an end taken by `accept()` answers the peer's close itself, before its
listeners run (unless accepted with `allowHalfOpen`), and from 2026-03-17 its
`binaryType` starts as `"blob"`: listeners get binary messages as a `Blob` (see
`_compat`). Ends taken by the Hibernation API keep the older behaviours. A listener
that raises drops its connection.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

from .._serialization import check_json_value
from ._blob import JsBlob
from ._compat import AUTO_REPLY_TO_CLOSE, STANDARD_BINARY_TYPE, enabled
from ._js_containers import JsBuffer, js_text
from ._structured_clone import clone_attachment, clone_size
from ._ws_events import (
    ABNORMAL_CLOSE,
    ABNORMAL_REASON,
    BinaryMessage,
    CloseEvent,
    MessageEvent,
    SocketEvent,
    js_error,
)

__all__ = ["WebSocket", "WebSocketPair", "WebSocketRequestResponsePair"]

logger = logging.getLogger("durability.runtime")

Sink = Callable[[SocketEvent], None]
"""Where an end's received events go once it is taken."""

MAX_ATTACHMENT_BYTES = 16_384
"""The largest attachment workerd keeps per WebSocket (measured there)."""

_RESERVED_CODES = frozenset({1004, 1005, 1006, 1015})
_NOT_ACCEPTED = (
    "You must call one of accept() or state.acceptWebSocket() on this WebSocket before "
    "sending messages."
)


class WebSocket:
    """One end of a WebSocket: `send`, `close`, `accept` with listeners, attachments.

    Made by `WebSocketPair`; `readyState` is `OPEN` (1) until this end or its peer
    closes (`CLOSING`, 2), and `CLOSED` (3) once both have.
    """

    CONNECTING = 0
    OPEN = 1
    CLOSING = 2
    CLOSED = 3

    def __init__(self) -> None:
        self._peer: WebSocket | None = None
        self._sink: Sink | None = None
        self._inbox: list[SocketEvent] = []
        self._taken_by: str | None = None
        self._close_sent = False
        self._close_received = False
        self._attachment: Any = None
        self._cloudflare_values = False
        self._listeners: dict[str, list[Callable[[Any], Any]]] = {}
        self._background: set[asyncio.Future[Any]] = set()
        self._tags: tuple[str, ...] = ()
        self._auto_response_ms: int | None = None
        self.onmessage: Callable[[Any], Any] | None = None
        self.onclose: Callable[[Any], Any] | None = None
        self.onerror: Callable[[Any], Any] | None = None
        self.onopen: Callable[[Any], Any] | None = None
        self.binaryType = "blob" if enabled(STANDARD_BINARY_TYPE) else "arraybuffer"
        self._half_open = False
        self.url: str | None = None
        self.protocol = ""
        self.extensions = ""

    def __repr__(self) -> str:
        return f"<WebSocket readyState={self.readyState} taken_by={self._taken_by}>"

    @property
    def readyState(self) -> int:
        """`OPEN` (1), `CLOSING` (2) once one side closed, `CLOSED` (3) once both did."""
        if self._close_sent and self._close_received:
            return self.CLOSED
        if self._close_sent or self._close_received:
            return self.CLOSING
        return self.OPEN

    def accept(self, options: object = None, *, allowHalfOpen: bool = False) -> None:
        """Start delivering events to this end's listeners (the standard API).
        `allowHalfOpen` (or an options object with it) keeps this end from answering
        the peer's close itself, where the compatibility date would have it do so."""
        if self._taken_by == "hibernation":
            raise js_error("TypeError", "Can't accept() WebSocket after enabling hibernation.")
        if isinstance(options, dict):
            allowHalfOpen = bool(options.get("allowHalfOpen", allowHalfOpen))
        elif options is not None:
            allowHalfOpen = bool(getattr(options, "allowHalfOpen", allowHalfOpen))
        self._half_open = allowHalfOpen
        if self._taken_by is None:
            self._take("accept", self._dispatch)

    def _take(self, by: str, sink: Sink) -> None:
        """Hand this end's events to `sink` from now on, those waiting first.

        `by` says what took it: `"accept"`, `"hibernation"` or `"network"`.
        """
        self._taken_by = by
        self._sink = sink
        waiting, self._inbox = self._inbox, []
        for event in waiting:
            sink(event)

    def send(self, message: object) -> None:
        """Send a text (`str`) or binary (bytes-like) message to the peer. An end of
        `js.WebSocketPair` sends binary only what JavaScript holds as binary (`to_js(data)`,
        a binary message received), and any other value as the text JavaScript's
        `String()` makes of it, as on Cloudflare (`b"x"` is sent as the text `b'x'`)."""
        if self._taken_by is None:
            raise js_error("TypeError", _NOT_ACCEPTED)
        if self._close_sent:
            raise js_error("TypeError", "Can't call WebSocket send() after close().")
        if isinstance(message, str):
            data: str | BinaryMessage = message
        elif self._cloudflare_values and not isinstance(message, JsBuffer | BinaryMessage):
            data = js_text(message)
        elif isinstance(message, bytes | bytearray | memoryview):
            data = BinaryMessage(message)
        else:
            raise TypeError(
                f"WebSocket send() takes str or bytes, got {type(message).__name__} (on "
                "Cloudflare other values are sent as the text of their JavaScript string)"
            )
        if self._peer is not None:
            self._peer._receive(MessageEvent(data))

    def close(self, code: int | None = None, reason: str | None = None) -> None:
        """Close this end: the peer gets a close event with `code` (default: none, which
        it reads as 1005) and `reason`. Closing again does nothing."""
        if code is not None:
            if isinstance(code, bool) or not isinstance(code, int):
                raise TypeError(f"close code must be an int, got {type(code).__name__}")
            if not 1000 <= code <= 4999 or code in _RESERVED_CODES:
                raise js_error("InvalidAccessError", f"Invalid WebSocket close code: {code}.")
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f"close reason must be a str, got {type(reason).__name__}")
        if self._close_sent:
            return
        self._close_sent = True
        if self._peer is not None:
            self._peer._receive(CloseEvent(1005 if code is None else code, reason or "", True))

    def _close_with(self, event: CloseEvent) -> None:
        """The network closed this end (any code, clean or not): tell the peer."""
        if not self._close_sent:
            self._close_sent = True
            if self._peer is not None:
                self._peer._receive(event)

    def _receive(self, event: SocketEvent) -> None:
        """Deliver `event` (sent by the peer, or the network's) to whatever took this end."""
        if isinstance(event, CloseEvent):
            if self._close_received:
                return
            self._close_received = True
        if self._sink is None:
            self._inbox.append(event)
        else:
            self._sink(event)

    def addEventListener(
        self, event_type: str, listener: Callable[[Any], Any], options: object = None
    ) -> None:
        """Call `listener(event)` for each `"message"`, `"close"` or `"error"` event
        (an async listener runs as a task)."""
        if not callable(listener):
            raise TypeError(f"listener must be callable, got {type(listener).__name__}")
        listeners = self._listeners.setdefault(event_type, [])
        if listener not in listeners:
            listeners.append(listener)

    def removeEventListener(
        self, event_type: str, listener: Callable[[Any], Any], options: object = None
    ) -> None:
        """Stop calling `listener` for `event_type` events."""
        listeners = self._listeners.get(event_type, [])
        if listener in listeners:
            listeners.remove(listener)

    def serializeAttachment(self, value: object) -> None:
        """Keep a copy of `value` with this end; it survives hibernation and eviction of
        the object. At most 16384 bytes: for an end of `js.WebSocketPair`, a value
        JavaScript can clone (see `_structured_clone`), counted as V8 serializes it, as on
        Cloudflare; otherwise a JSON value, counted as JSON text."""
        if self._cloudflare_values:
            copy: Any = clone_attachment(value)
            size = clone_size(copy)
        else:
            copy = json.dumps(check_json_value(value, "attachment"), allow_nan=False)
            size = len(copy.encode("utf-8"))
        if size > MAX_ATTACHMENT_BYTES:
            raise js_error(
                "Error",
                f"A WebSocket 'attachment' cannot be larger than {MAX_ATTACHMENT_BYTES} "
                f"bytes.'attachment' was {size} bytes.",
            )
        self._attachment = None if value is None else copy

    def deserializeAttachment(self) -> Any:
        """A fresh copy of the value last given to `serializeAttachment` (or `None`)."""
        if self._attachment is None or self._cloudflare_values:
            return clone_attachment(self._attachment)
        return json.loads(self._attachment)

    def _dispatch(self, event: SocketEvent) -> None:
        """The standard API: run the listeners on a later turn, as workerd delivers (a
        close is answered first, where the compatibility date says so)."""
        if isinstance(event, CloseEvent) and self._answers_close():
            self._close_sent = True
            if self._peer is not None:
                self._peer._receive(CloseEvent(event.code, event.reason, True))
        data = event.data if isinstance(event, MessageEvent) else None
        if isinstance(data, BinaryMessage) and self.binaryType == "blob":
            event = MessageEvent(JsBlob(bytes(data), ""))
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._fire(event)
        else:
            loop.call_soon(self._fire, event)

    def _answers_close(self) -> bool:
        """Whether this end answers the peer's close itself (see the module's notes)."""
        return not (self._half_open or self._close_sent) and enabled(AUTO_REPLY_TO_CLOSE)

    def _fire(self, event: SocketEvent) -> None:
        handlers = list(self._listeners.get(event.type, ()))
        prop = getattr(self, f"on{event.type}", None)
        if prop is not None:
            handlers.append(prop)
        for handler in handlers:
            try:
                result = handler(event)
                if inspect.isawaitable(result):
                    task = asyncio.ensure_future(result)
                    self._background.add(task)
                    task.add_done_callback(self._listener_done)
            except Exception:
                logger.exception("a WebSocket %s listener raised", event.type)
                self._drop()

    def _listener_done(self, task: asyncio.Future[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("a WebSocket listener failed", exc_info=task.exception())
            self._drop()

    def _drop(self) -> None:
        """A listener failed: as on workerd, the connection is dropped (the peer gets no
        close frame), and the object or Worker that accepted it goes on."""
        self._close_with(CloseEvent(ABNORMAL_CLOSE, ABNORMAL_REASON, False))


class WebSocketPair:
    """Two connected WebSocket ends: `client, server = WebSocketPair()`.

    Also `pair[0]`/`pair[1]`, `pair.object_values()`, and `WebSocketPair.new()`: the
    spellings Python code on Cloudflare uses for the JavaScript class.
    """

    _cloudflare_values = False
    """Whether its ends take Cloudflare's values only (`js.WebSocketPair`'s do)."""

    def __init__(self) -> None:
        self.client = WebSocket()
        self.server = WebSocket()
        self.client._peer = self.server
        self.server._peer = self.client
        self.client._cloudflare_values = self.server._cloudflare_values = self._cloudflare_values

    @classmethod
    def new(cls) -> WebSocketPair:
        """A new pair (pyodide's spelling of JavaScript's `new WebSocketPair()`)."""
        return cls()

    def object_values(self) -> tuple[WebSocket, WebSocket]:
        """`(client, server)`, as `Object.values(pair)` gives them."""
        return (self.client, self.server)

    def __iter__(self) -> Iterator[WebSocket]:
        return iter((self.client, self.server))

    def __getitem__(self, index: int) -> WebSocket:
        return (self.client, self.server)[index]

    def __len__(self) -> int:
        return 2


class WebSocketRequestResponsePair:
    """The request and response of `ctx.setWebSocketAutoResponse`: a message equal to
    `request` on a hibernatable WebSocket is answered with `response` without waking
    the object."""

    def __init__(self, request: str, response: str) -> None:
        for name, value in (("request", request), ("response", response)):
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a str, got {type(value).__name__}")
        self.request = request
        self.response = response

    @classmethod
    def new(cls, request: str, response: str) -> WebSocketRequestResponsePair:
        """A new pair (pyodide's spelling of the JavaScript constructor)."""
        return cls(request, response)

    def __repr__(self) -> str:
        return f"WebSocketRequestResponsePair({self.request!r}, {self.response!r})"
