"""WebSockets three ways: hibernatable ones in `Room`, accept() with listeners in `Echo`,
and a pair the Worker answers itself; and `Bare`, whose `fetch` takes no request."""

import json
from urllib.parse import parse_qs, urlsplit

from js import WebSocketPair, WebSocketRequestResponsePair
from pyodide.ffi import create_proxy, to_js
from workers import DurableObject, Response, WorkerEntrypoint


def kind(message):
    """What arrived, the same on every host: text as is, binary as its bytes in hex."""
    if isinstance(message, str):
        return f"text:{message}"
    if hasattr(message, "to_bytes"):
        message = message.to_bytes()
    return f"bytes:{bytes(message).hex()}"


SENT = (
    b"\x01\x02",
    bytearray(b"\x03"),
    to_js(b"\x05"),
    5,
    2.5,
    2**60,
    True,
    None,
    to_js([1, None, "a"]),
    to_js({"a": 1}),
    [1, 2],
    {"a": 1},
)
"""What `send` is given besides str: only JavaScript's binary values go as binary."""


class Room(DurableObject):
    """Members join with ?user=NAME&team=TEAM; every socket is tagged with both."""

    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS said (user TEXT, text TEXT)")
        ctx.setWebSocketAutoResponse(WebSocketRequestResponsePair.new("ping", "pong"))

    async def fetch(self, request):
        query = parse_qs(urlsplit(request.url).query)
        user, team = query["user"][0], query.get("team", ["none"])[0]
        client, server = WebSocketPair.new().object_values()
        self.ctx.acceptWebSocket(server, to_js([user, f"team:{team}"]))
        server.serializeAttachment(json.dumps({"user": user, "team": team}))
        server.send(f"welcome {user}; here: {self.members()}")
        self.tell(f"{user} joined", skip=server)
        return Response(None, status=101, web_socket=client)

    async def webSocketMessage(self, ws, message):
        user = json.loads(ws.deserializeAttachment())["user"]
        if not isinstance(message, str):
            ws.send(f"{user} sent {kind(message)}")
            ws.send(message)
            return
        if message.startswith("team "):
            _, team, text = message.split(" ", 2)
            targets = self.ctx.getWebSockets(f"team:{team}")
            for target in targets:
                target.send(f"{user} to team {team}: {text}")
            ws.send(f"told {len(targets)}")
            return
        if message == "values":
            for value in SENT:
                ws.send(value)
            return
        if message == "tags":
            ws.send(",".join(self.ctx.getTags(ws)))
            return
        if message == "stamp":
            stamp = self.ctx.getWebSocketAutoResponseTimestamp(ws)
            ws.send(f"auto-response seen: {stamp is not None}")
            return
        if message.startswith("close "):
            _, code, reason = message.split(" ", 2)
            ws.close(int(code), reason)
            return
        if message == "fail":
            raise ValueError("a handler failed")
        self.ctx.storage.sql.exec("INSERT INTO said VALUES (?, ?)", user, message)
        self.tell(f"{user}: {message}")

    async def webSocketClose(self, ws, code, reason, wasClean):
        user = json.loads(ws.deserializeAttachment())["user"]
        if reason == "quiet":
            return
        try:
            ws.send(f"goodbye {user}")
            goodbye = "sent"
        except Exception as error:
            goodbye = type(error).__name__
        ws.close(1000, "bye")
        self.tell(f"{user} left ({code}, {reason or '-'}, clean={wasClean}, {goodbye})", skip=ws)

    async def webSocketError(self, ws, error):
        self.tell(f"error: {type(error).__name__}", skip=ws)

    async def said(self):
        rows = self.ctx.storage.sql.exec("SELECT user, text FROM said ORDER BY rowid")
        return json.dumps([[row.user, row.text] for row in rows])

    async def refusals(self):
        return "\n".join(refusal(self.ctx, case) for case in BAD_VALUES)

    async def kept(self):
        """Attachments and tags as they read back."""
        lines = []
        for value in (to_js({"a": [1, {"b": 2}]}), to_js([1, "x"]), 2**60, 2.0, "s", None):
            _, server = WebSocketPair.new().object_values()
            self.ctx.acceptWebSocket(server, to_js([1, True, "t"]))
            server.serializeAttachment(value)
            back = server.deserializeAttachment()
            plain = back.to_py() if hasattr(back, "to_py") else back
            lines.append(f"{type(plain).__name__} {plain!r} tags {list(self.ctx.getTags(server))}")
            server.close()
        return "\n".join(lines)

    async def connected(self):
        return json.dumps({"members": self.members(), "sockets": len(self.ctx.getWebSockets())})

    def members(self):
        users = [json.loads(ws.deserializeAttachment())["user"] for ws in self.ctx.getWebSockets()]
        return ",".join(sorted(users)) or "nobody"

    def tell(self, text, skip=None):
        for ws in self.ctx.getWebSockets():
            if ws != skip and ws.readyState == 1:
                ws.send(text)


BAD_VALUES = {
    "long tag": lambda ctx, ws: ctx.acceptWebSocket(ws, to_js(["x" * 257])),
    "eleven tags": lambda ctx, ws: ctx.acceptWebSocket(ws, to_js([str(n) for n in range(11)])),
    "tags as a list": lambda ctx, ws: ctx.acceptWebSocket(ws, ["a"]),
    "accept then hibernate": lambda ctx, ws: (ws.accept(), ctx.acceptWebSocket(ws)),
    "hibernate then accept": lambda ctx, ws: (ctx.acceptWebSocket(ws), ws.accept()),
    "hibernate twice": lambda ctx, ws: (ctx.acceptWebSocket(ws), ctx.acceptWebSocket(ws)),
    "tags of unaccepted": lambda ctx, ws: ctx.getTags(ws),
    "send unaccepted": lambda ctx, ws: ws.send("x"),
    "send after close": lambda ctx, ws: (ws.accept(), ws.close(), ws.send("x")),
    "close 999": lambda ctx, ws: (ws.accept(), ws.close(999)),
    "close 1005": lambda ctx, ws: (ws.accept(), ws.close(1005)),
    "close 5000": lambda ctx, ws: (ws.accept(), ws.close(5000)),
    "close long reason": lambda ctx, ws: (ws.accept(), ws.close(1000, "r" * 124)),
    "attachment too big": lambda ctx, ws: ws.serializeAttachment("a" * 20000),
    "attachment a function": lambda ctx, ws: ws.serializeAttachment(print),
    "attachment a dict": lambda ctx, ws: ws.serializeAttachment({"a": 1}),
    "attachment a list": lambda ctx, ws: ws.serializeAttachment([1]),
    "attachment bytes": lambda ctx, ws: ws.serializeAttachment(b"x"),
    "attachment big list": lambda ctx, ws: ws.serializeAttachment(to_js(["x" * 16400])),
    "attachment big map": lambda ctx, ws: ws.serializeAttachment(to_js({"k": "x" * 16400})),
    "attachment two-byte": lambda ctx, ws: ws.serializeAttachment("\u20ac" * 9000),
    "attachment astral": lambda ctx, ws: ws.serializeAttachment("\U0001f600" * 4200),
    "attachment mixed": lambda ctx, ws: ws.serializeAttachment(
        to_js([1, 2.5, True, None, -7, 2**31, 2**60, "x" * 16400])
    ),
    "attachment at the limit": lambda ctx, ws: ws.serializeAttachment("x" * 16379),
    "attachment past the limit": lambda ctx, ws: ws.serializeAttachment("x" * 16380),
}
"""The values the WebSocket API refuses (each on a fresh pair's server end)."""


def refusal(ctx, case):
    _, server = WebSocketPair.new().object_values()
    try:
        BAD_VALUES[case](ctx, server)
    except Exception as error:
        return f"{case}: {type(error).__name__}: {(str(error).strip().splitlines() or [''])[-1]}"
    return f"{case}: ok"


class Echo(DurableObject):
    """accept() and event listeners: echoes each message, counts them in memory."""

    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        self.count = 0

    async def fetch(self, request):
        client, server = WebSocketPair.new().object_values()
        server.accept()

        def on_message(event):
            self.count += 1
            if event.data == "fail":
                raise ValueError("a listener failed")
            server.send(f"echo {self.count}: {kind(event.data)}")

        def on_close(event):
            server.close(event.code, f"echo closed after {self.count}")

        server.addEventListener("message", create_proxy(on_message))
        server.addEventListener("close", create_proxy(on_close))
        return Response(None, status=101, web_socket=client)


class Bare(DurableObject):
    """Handlers declared with fewer parameters than workerd passes."""

    async def fetch(self):
        return Response("fetch without the request")


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        parts = urlsplit(request.url).path.strip("/").split("/")
        upgrade = (request.headers.get("Upgrade") or "").lower() == "websocket"
        if parts[0] == "rooms" and len(parts) == 3:
            room = self.env.ROOMS.getByName(parts[1])
            if parts[2] == "said":
                return Response(await room.said())
            if parts[2] == "connected":
                return Response(await room.connected())
            if parts[2] == "refusals":
                return Response(await room.refusals())
            if parts[2] == "kept":
                return Response(await room.kept())
            if parts[2] == "ws":
                if not upgrade:
                    return Response(
                        "expected a WebSocket", status=426, headers={"x-why": "no upgrade"}
                    )
                return await room.fetch(request)
        if parts == ["bare"]:
            return await self.env.BARES.getByName("one").fetch(request)
        if parts == ["echo"]:
            return await self.env.ECHOES.getByName("one").fetch(request)
        if parts == ["here"]:
            client, server = WebSocketPair.new().object_values()
            server.accept()
            server.send("the worker answers")

            def on_message(event):
                server.send(f"worker heard {kind(event.data)}")

            server.addEventListener("message", create_proxy(on_message))
            return Response(None, status=101, web_socket=client, headers={"x-served": "worker"})
        return Response("not found", status=404)
