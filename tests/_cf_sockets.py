"""A WebSocket client for replaying a test project's steps: what a host sent, frame by frame.

Built on `wsproto` over a plain socket, so nothing is answered behind the replay's back:
the handshake's refusal keeps its status, headers and body, a close frame keeps its code
and reason, and a close is answered (echoing the host's code) only when the host closed
first. Each answer is the list of frames received, as JSON-ready values:
`{"text": ...}`, `{"bytes": HEX}`, `{"close": CODE, "reason": ...}`, then `"timeout"`
if fewer frames came than were awaited, or `"eof"` if the connection ended without a
close frame.
"""

from __future__ import annotations

import contextlib
import socket
from typing import Any
from urllib.parse import urlsplit

from wsproto import WSConnection
from wsproto.connection import ConnectionState, ConnectionType
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)
from wsproto.utilities import LocalProtocolError

RECEIVE_TIMEOUT_S = 10.0
"""How long one awaited frame may take, by default, before the answer records
`"timeout"`."""

_CLIENT_HEADERS = frozenset(
    {"host", "upgrade", "connection", "sec-websocket-key", "sec-websocket-version"}
)
"""Handshake headers the client writes itself (a step's own are not sent twice)."""

Frame = dict[str, Any] | str


class Refused(Exception):
    """The host answered the handshake with an HTTP response instead of 101."""

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        super().__init__(f"WebSocket handshake refused with {status}")
        self.status, self.headers, self.body = status, headers, body


class Client:
    """One WebSocket connection to a host, opened by `connect`."""

    def __init__(self, base_url: str, path: str, headers: list[tuple[str, str]]) -> None:
        parts = urlsplit(base_url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 80
        self._socket = socket.create_connection((host, port), timeout=RECEIVE_TIMEOUT_S)
        self._ws = WSConnection(ConnectionType.CLIENT)
        self._pending: list[Event] = []
        self._text: list[str] = []
        self._bytes: list[bytes] = []
        self.status = 0
        self.headers: list[tuple[str, str]] = []
        extra = [(k.encode(), v.encode()) for k, v in headers if k.lower() not in _CLIENT_HEADERS]
        self._write(Request(host=f"{host}:{port}", target=path, extra_headers=extra))

    def connect(self) -> None:
        """Complete the handshake; raises `Refused` with the host's HTTP answer."""
        refusal: RejectConnection | None = None
        body = b""
        while True:
            event = self._next_event()
            if isinstance(event, AcceptConnection):
                self.status = 101
                self.headers = [
                    (k.decode("latin-1"), v.decode("latin-1")) for k, v in event.extra_headers
                ]
                return
            if isinstance(event, RejectConnection):
                refusal = event
                if not event.has_body:
                    break
            elif isinstance(event, RejectData):
                body += event.data
                if event.body_finished:
                    break
            elif event is None:
                break
        self.close_socket()
        if refusal is None:
            raise ConnectionError("the connection ended during the WebSocket handshake")
        pairs = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in refusal.headers]
        raise Refused(refusal.status_code, pairs, body)

    def send(self, data: str | bytes) -> None:
        """Send one text (str) or binary (bytes) message."""
        event = TextMessage(data) if isinstance(data, str) else BytesMessage(data)
        self._write(event)

    def receive(self, count: int, timeout_s: float = RECEIVE_TIMEOUT_S) -> list[Frame]:
        """The next `count` frames (a close frame ends the list early), each awaited
        `timeout_s` at most."""
        self._socket.settimeout(timeout_s)
        frames: list[Frame] = []
        while len(frames) < count:
            frame = self._next_frame()
            frames.append(frame)
            if frame in ("timeout", "eof") or "close" in frame:
                break
        return frames

    def close(self, code: int, reason: str, timeout_s: float = RECEIVE_TIMEOUT_S) -> list[Frame]:
        """Send a close frame; the frames received until the host's close frame (each
        awaited `timeout_s` at most)."""
        self._socket.settimeout(timeout_s)
        self._write(CloseConnection(code=code, reason=reason))
        frames: list[Frame] = []
        while True:
            frame = self._next_frame()
            frames.append(frame)
            if frame in ("timeout", "eof") or "close" in frame:
                self.close_socket()
                return frames

    def close_socket(self) -> None:
        """Drop the TCP connection, without a close frame."""
        with contextlib.suppress(OSError):
            self._socket.close()

    def _next_frame(self) -> Frame:
        while True:
            try:
                event = self._next_event()
            except TimeoutError:
                return "timeout"
            if event is None:
                return "eof"
            if isinstance(event, Ping):
                self._write(event.response())
            elif isinstance(event, CloseConnection):
                if self._ws.state is ConnectionState.REMOTE_CLOSING:
                    self._write(event.response())
                return {"close": event.code, "reason": event.reason}
            elif isinstance(event, TextMessage):
                self._text.append(event.data)
                if event.message_finished:
                    text, self._text = "".join(self._text), []
                    return {"text": text}
            elif isinstance(event, BytesMessage):
                self._bytes.append(bytes(event.data))
                if event.message_finished:
                    data, self._bytes = b"".join(self._bytes), []
                    return {"bytes": data.hex()}

    def _next_event(self) -> Event | None:
        """The next protocol event, reading the socket as needed; None at end of stream."""
        while not self._pending:
            try:
                data = self._socket.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                data = b""
            if not data:
                return None
            self._ws.receive_data(data)
            self._pending.extend(self._ws.events())
        return self._pending.pop(0)

    def _write(self, event: Event) -> None:
        """Send `event`; nothing when the connection no longer allows it (the host closed
        or dropped it: the frames received say so)."""
        with contextlib.suppress(ConnectionResetError, BrokenPipeError, LocalProtocolError):
            self._socket.sendall(self._ws.send(event))
