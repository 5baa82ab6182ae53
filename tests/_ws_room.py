"""A Durable Object serving WebSockets both ways, and a client end that records what it
receives: what the embedded-runtime WebSocket tests share."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlparse

from durability.runtime import (
    DurableObject,
    Request,
    Response,
    WebSocket,
    WebSocketPair,
    WebSocketRequestResponsePair,
)


class Room(DurableObject):
    """`fetch` upgrades: `?mode=std` accepts with listeners, else the Hibernation API
    with `?tags=a,b` and `?user=` as the attachment. Records constructions and handler
    calls on the class, so they survive eviction."""

    built = 0
    closes: ClassVar[list[tuple[int, str, bool, int, int]]] = []
    errors: ClassVar[list[str]] = []

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        Room.built += 1
        self.serial = Room.built

    async def fetch(self, request: Request) -> Response:
        query = parse_qs(urlparse(request.url).query)
        if request.headers.get("Upgrade") != "websocket":
            return Response("expected a WebSocket upgrade", status=426)
        client, server = WebSocketPair()
        if query.get("mode") == ["std"]:
            server.accept()
            server.addEventListener("message", lambda event: server.send(f"echo:{event.data}"))
        else:
            tags = query["tags"][0].split(",") if "tags" in query else []
            self.ctx.acceptWebSocket(server, tags)
            server.serializeAttachment({"user": query.get("user", ["anon"])[0]})
            server.send(f"welcome #{self.serial}")
        return Response(None, status=101, web_socket=client)

    async def webSocketMessage(self, ws: WebSocket, message: Any) -> None:
        if message == "raise":
            raise ValueError("boom")
        if message == "who":
            users = [s.deserializeAttachment()["user"] for s in self.ctx.getWebSockets()]
            ws.send(f"#{self.serial} {','.join(users)}")
            return
        if isinstance(message, bytes):
            ws.send(message.to_bytes()[::-1])  # type: ignore[attr-defined]  # an ArrayBuffer
            return
        for other in self.ctx.getWebSockets("room"):
            other.send(f"{ws.deserializeAttachment()['user']}: {message}")

    async def webSocketClose(self, ws: WebSocket, code: int, reason: str, clean: bool) -> None:
        Room.closes.append((code, reason, clean, ws.readyState, len(self.ctx.getWebSockets())))
        ws.close(code if code not in (1005, 1006) else 1000, "bye")

    async def webSocketError(self, ws: WebSocket, error: BaseException) -> None:
        Room.errors.append(str(error))

    async def count(self) -> int:
        return len(self.ctx.getWebSockets())

    async def set_auto(self, request: str, response: str) -> None:
        self.ctx.setWebSocketAutoResponse(WebSocketRequestResponsePair.new(request, response))

    async def auto_state(self) -> list[Any]:
        """The auto-response's answer and when it last answered on the first socket."""
        pair = self.ctx.getWebSocketAutoResponse()
        when = self.ctx.getWebSocketAutoResponseTimestamp(self.ctx.getWebSockets()[0])
        return [pair and pair.response, when and when.timestamp() * 1000]


def reset_room() -> None:
    """Forget what earlier tests recorded on `Room`."""
    Room.built = 0
    Room.closes = []
    Room.errors = []


class Client:
    """The client end of an upgrade, accepted here, its events kept in order."""

    def __init__(self, end: WebSocket) -> None:
        self.end = end
        self.events: asyncio.Queue[Any] = asyncio.Queue()
        end.accept()
        for kind in ("message", "close", "error"):
            end.addEventListener(kind, self.events.put_nowait)

    async def next(self) -> Any:
        """The next event (a loop turn or two at most: nothing here waits on time)."""
        return await asyncio.wait_for(self.events.get(), 5)

    async def text(self) -> Any:
        """The data of the next event, which must be a message."""
        event = await self.next()
        assert event.type == "message", event
        return event.data


async def connect(stub: Any, query: str = "") -> Client:
    """Open a WebSocket to the object behind `stub` through `stub.fetch`."""
    request = Request(f"http://room/ws?{query}", headers={"Upgrade": "websocket"})
    response = await stub.fetch(request)
    assert response.status == 101 and response.web_socket is not None
    return Client(response.web_socket)
