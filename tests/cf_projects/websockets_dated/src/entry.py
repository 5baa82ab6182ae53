"""Dated WebSocket behaviours. `Notes` keeps, per object, what its sockets' listeners saw,
and answers it over HTTP; `Held` is a hibernatable socket for comparison."""

import json
from urllib.parse import urlsplit

from js import WebSocketPair
from pyodide.ffi import create_proxy
from workers import DurableObject, Response, WorkerEntrypoint


def attempt(make):
    """What `make()` did: "ok", or the error's type and last line."""
    try:
        make()
    except Exception as error:
        return f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[-1]}"
    return "ok"


class Notes(DurableObject):
    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        self.seen = []

    async def fetch(self, request):
        path = urlsplit(request.url).path
        if path.endswith("/seen"):
            return Response(json.dumps(self.seen))
        client, server = WebSocketPair.new().object_values()
        if path.endswith("/half-open"):
            server.accept(allowHalfOpen=True)
        else:
            server.accept()
        self.seen.append(f"binaryType {server.binaryType}")

        async def on_message(event):
            data = event.data
            if isinstance(data, str):
                server.send(f"text {data}")
                return
            self.seen.append(f"binary as a Blob: {hasattr(data, 'arrayBuffer')}")
            content = await data.arrayBuffer()
            server.send(f"binary {bytes(content.to_bytes()).hex()} of {data.size}")

        def on_close(event):
            self.seen.append(f"close {event.code} {event.reason} state {server.readyState}")
            self.seen.append(f"send after: {attempt(lambda: server.send('late'))}")
            self.seen.append(f"close after: {attempt(lambda: server.close(4100, 'mine'))}")

        server.addEventListener("message", create_proxy(on_message))
        server.addEventListener("close", create_proxy(on_close))
        return Response(None, status=101, web_socket=client)


class Held(DurableObject):
    async def fetch(self, request):
        client, server = WebSocketPair.new().object_values()
        self.ctx.acceptWebSocket(server)
        return Response(None, status=101, web_socket=client)

    async def webSocketMessage(self, ws, message):
        ws.send(f"held got {'text' if isinstance(message, str) else 'binary'}")

    async def webSocketClose(self, ws, code, reason, wasClean):
        ws.send(f"state {ws.readyState} at close")
        ws.close(4200, "held closes")


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        parts = urlsplit(request.url).path.strip("/").split("/")
        if parts[0] == "notes":
            return await self.env.NOTES.getByName(parts[1]).fetch(request)
        if parts[0] == "held":
            return await self.env.HELD.getByName("one").fetch(request)
        return Response("not found", status=404)
