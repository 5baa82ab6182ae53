"""The WebSocket protocol of `durability serve`: uvicorn's wsproto one, with the close
handshake as workerd does it.

uvicorn answers a client's close frame at once, echoing its code. workerd does not: the
close reaches the worker's end of the socket, which may still send messages, and the
close frame the client gets back is the one that end sends when it closes (with its
own code and reason), or none at all (measured on a local workerd). So here a client's
close frame is not answered: the app gets `websocket.disconnect` marked
`HALF_CLOSED`, may still send messages, and answers with `websocket.close`, or with
`ABORT`, which ends the connection without a close frame (see `_ws_asgi`). The app
knows it may do so by the `HALF_CLOSE` extension in its scope.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.websockets.wsproto_impl import WSProtocol
from wsproto.connection import ConnectionState
from wsproto.events import CloseConnection
from wsproto.frame_protocol import FrameProtocol

from .ws_asgi import ABORT, HALF_CLOSE, HALF_CLOSED

__all__ = ["WorkerWSProtocol"]


class WorkerWSProtocol(WSProtocol):
    """uvicorn's wsproto protocol, leaving the answer to a client's close to the app."""

    _half_closed = False

    def handle_connect(self, event: Any) -> None:
        super().handle_connect(event)
        self.scope["extensions"][HALF_CLOSE] = {}

    def handle_close(self, event: CloseConnection) -> None:
        if self.close_sent or self.conn.state is not ConnectionState.REMOTE_CLOSING:
            super().handle_close(event)
            return
        self._half_closed = True
        stop_keepalive = getattr(self, "stop_keepalive", None)
        if stop_keepalive is not None:
            stop_keepalive()
        self.queue.put_nowait(
            {  # type: ignore[arg-type]
                "type": "websocket.disconnect",
                "code": event.code,
                "reason": event.reason or "",
                HALF_CLOSED: True,
            }
        )
        if self.read_paused:
            # Reading on is how a connection lost from now on is noticed.
            self.read_paused = False
            self.transport.resume_reading()

    async def send(self, message: Any) -> None:
        if message["type"] == ABORT:
            self.close_sent = True
            self.transport.close()
            return
        if not self._half_closed or self.close_sent or self.disconnected:
            await super().send(message)
            return
        if message["type"] == "websocket.send":
            data = message.get("bytes")
            payload = message.get("text") if data is None else data
            # wsproto sends no message once the peer closed: frame it without it.
            frame = FrameProtocol(client=False, extensions=[]).send_data(payload, True)
            self.transport.write(bytes(frame))
        elif message["type"] == "websocket.close":
            self.close_sent = True
            code, reason = message.get("code", 1000), message.get("reason") or ""
            self.transport.write(self.conn.send(CloseConnection(code=code, reason=reason)))
            self.transport.close()
        else:
            await super().send(message)
