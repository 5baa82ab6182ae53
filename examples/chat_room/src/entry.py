"""Chat rooms over WebSockets, one Durable Object per room (the Hibernation API).

A WebSocket to /rooms/ROOM/ws?user=NAME joins a room. The client sends JSON:
{"say": TEXT} posts to everyone in the room, {"to": NAME, "say": TEXT} whispers to one
member; the text "ping" is answered "pong" without waking the room. The room sends
JSON events: "welcome" (the members and the last messages), "joined", "left",
"message", "whisper", "error". GET /rooms/ROOM answers the members and the number of
messages. Messages are kept in the room's SQLite storage; who is connected is kept by
the sockets themselves (their tags and attachments), so it survives hibernation.
"""

import json
from urllib.parse import parse_qs, urlparse

from js import WebSocketPair, WebSocketRequestResponsePair
from pyodide.ffi import to_js
from workers import DurableObject, Response, WorkerEntrypoint

HISTORY = 20
"""How many of the last messages a new member receives."""

USAGE = 'send {"say": TEXT} or {"to": NAME, "say": TEXT}'


class ChatRoom(DurableObject):
    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        ctx.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS messages ("
            " seq INTEGER PRIMARY KEY AUTOINCREMENT, user TEXT NOT NULL, text TEXT NOT NULL)"
        )
        ctx.setWebSocketAutoResponse(WebSocketRequestResponsePair.new("ping", "pong"))

    async def fetch(self, request):
        user = parse_qs(urlparse(request.url).query).get("user", [""])[0]
        if not user:
            return Response("a ?user=NAME is required", status=400)
        client, server = WebSocketPair.new().object_values()
        # Tagged with the user's name, for whispers; workerd wants a JavaScript array.
        self.ctx.acceptWebSocket(server, to_js([user]))
        server.serializeAttachment(json.dumps({"user": user}))
        welcome = {
            "type": "welcome",
            "user": user,
            "members": self.members(),
            "history": self.history(),
        }
        server.send(json.dumps(welcome))
        self.broadcast({"type": "joined", "user": user}, skip=server)
        return Response(None, status=101, web_socket=client)

    async def webSocketMessage(self, ws, message):
        data = _parse(message)
        if data is None:
            ws.send(json.dumps({"type": "error", "error": USAGE}))
            return
        user = _user(ws)
        if "to" in data:
            whisper = {"type": "whisper", "from": user, "to": data["to"], "text": data["say"]}
            targets = self.ctx.getWebSockets(data["to"])
            if not targets:
                ws.send(json.dumps({"type": "error", "error": f"{data['to']} is not here"}))
                return
            for target in [*targets, ws] if ws not in targets else targets:
                target.send(json.dumps(whisper))
            return
        row = self.ctx.storage.sql.exec(
            "INSERT INTO messages (user, text) VALUES (?, ?) RETURNING seq", user, data["say"]
        ).one()
        self.broadcast({"type": "message", "seq": row.seq, "user": user, "text": data["say"]})

    async def webSocketClose(self, ws, code, reason, wasClean):
        # On workerd the close handshake completes only when the room closes its end too.
        ws.close(1000, "bye")
        self.broadcast({"type": "left", "user": _user(ws)}, skip=ws)

    async def summary(self):
        count = self.ctx.storage.sql.exec("SELECT count(*) AS n FROM messages").one().n
        # A JSON string crosses RPC the same way with either `workers` SDK.
        return json.dumps({"members": self.members(), "messages": count})

    def members(self):
        return sorted({_user(ws) for ws in self.ctx.getWebSockets()})

    def history(self):
        rows = self.ctx.storage.sql.exec(
            "SELECT seq, user, text FROM messages ORDER BY seq DESC LIMIT ?", HISTORY
        )
        return [{"seq": r.seq, "user": r.user, "text": r.text} for r in rows][::-1]

    def broadcast(self, event, skip=None):
        text = json.dumps(event)
        for ws in self.ctx.getWebSockets():
            if ws == skip or ws.readyState != 1:
                continue
            ws.send(text)


def _user(ws):
    return json.loads(ws.deserializeAttachment())["user"]


def _parse(message):
    """The client's request as a dict, or None when it is not one this room serves."""
    try:
        data = json.loads(message) if isinstance(message, str) else None
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("say"), str):
        return None
    if "to" in data and not isinstance(data["to"], str):
        return None
    return data


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        parts = urlparse(request.url).path.strip("/").split("/")
        if len(parts) in (2, 3) and parts[0] == "rooms" and parts[1]:
            room = self.env.ROOMS.getByName(parts[1])
            if parts[2:] == ["ws"]:
                if (request.headers.get("Upgrade") or "").lower() != "websocket":
                    return Response("expected Upgrade: websocket", status=426)
                return await room.fetch(request)
            if len(parts) == 2:
                summary = await room.summary()
                return Response(summary, headers={"content-type": "application/json"})
        return Response("GET /rooms/ROOM, or a WebSocket to /rooms/ROOM/ws?user=NAME\n", status=404)
