"""WebSockets through `durability serve`: a real server process, real WebSocket clients.

The project below is written to a temporary folder and served with `--virtual-time`,
so a test can let an object hibernate (idle eviction) while its clients stay connected.
"""

from __future__ import annotations

import json
import os
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websocket

from _served import free_port, start, stop

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.name != "posix", reason="stops the server with SIGINT"),
]

ENTRY = """
import json
from urllib.parse import parse_qs, urlparse

from js import WebSocketPair
from pyodide.ffi import to_js
from workers import DurableObject, Response, WorkerEntrypoint

BUILT = [0]


class Echo(DurableObject):
    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        BUILT[0] += 1
        self.serial = BUILT[0]
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS closes (code, reason, clean)")

    async def fetch(self, request):
        user = parse_qs(urlparse(request.url).query).get("user", ["anon"])[0]
        client, server = WebSocketPair.new().object_values()
        self.ctx.acceptWebSocket(server, to_js([user]))
        server.serializeAttachment(user)
        return Response(None, status=101, web_socket=client, headers={"x-room": "echo"})

    async def webSocketMessage(self, ws, message):
        if not isinstance(message, str):
            ws.send(to_js(message.to_bytes()[::-1]))
        elif message.startswith("close "):
            _, code, reason = message.split(" ", 2)
            ws.close(int(code), reason)
        elif message == "who":
            ws.send(f"#{self.serial} {ws.deserializeAttachment()}")
        else:
            ws.send(f"text:{message}")

    async def webSocketClose(self, ws, code, reason, wasClean):
        self.ctx.storage.sql.exec("INSERT INTO closes VALUES (?, ?, ?)", code, reason, wasClean)
        ws.close(1000, "bye")

    async def closes(self):
        rows = self.ctx.storage.sql.exec("SELECT * FROM closes").toArray()
        return json.dumps([[r.code, r.reason, bool(r.clean)] for r in rows])


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        url = urlparse(request.url)
        room = self.env.ECHO.getByName(parse_qs(url.query).get("room", ["one"])[0])
        if url.path == "/ws":
            return await room.fetch(request)
        if url.path == "/closes":
            return Response(await room.closes(), headers={"content-type": "application/json"})
        if url.path == "/boom":
            raise ValueError("boom")
        return Response("not here", status=404)
"""

CONFIG = {
    "name": "ws-echo",
    "main": "src/entry.py",
    "compatibility_date": "2026-03-01",
    "compatibility_flags": ["python_workers"],
    "durable_objects": {"bindings": [{"name": "ECHO", "class_name": "Echo"}]},
    "migrations": [{"tag": "v1", "new_sqlite_classes": ["Echo"]}],
}


def write_project(folder: Path) -> Path:
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "entry.py").write_text(ENTRY)
    (folder / "wrangler.jsonc").write_text(json.dumps(CONFIG))
    return folder


class Server:
    """A `durability serve --virtual-time` process of the echo project."""

    def __init__(self, project: Path, data: Path) -> None:
        self.project, self.data = project, data
        self.port = free_port()
        self.process = start(project, data, self.port, "--virtual-time")
        self.http = f"http://127.0.0.1:{self.port}"
        self.ws = f"ws://127.0.0.1:{self.port}"

    def connect(self, query: str) -> websocket.WebSocket:
        return websocket.create_connection(f"{self.ws}/ws?{query}", timeout=30)

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.http + path, timeout=30) as response:
            return json.loads(response.read())

    def advance(self, ms: int) -> None:
        request = urllib.request.Request(f"{self.http}/_durability/advance?ms={ms}", method="POST")
        urllib.request.urlopen(request, timeout=30).close()

    def stop(self) -> str:
        return stop(self.process)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = Server(write_project(tmp_path / "project"), tmp_path / "data")
    try:
        yield running
    finally:
        if running.process.poll() is None:
            running.stop()


def test_text_and_binary_frames_and_the_upgrade_headers(server: Server) -> None:
    """Text arrives as text, binary as binary, and the 101 carries the worker's headers."""
    client = server.connect("user=ann")
    headers = client.getheaders()
    assert headers is not None and headers["x-room"] == "echo"
    client.send("hi")
    assert client.recv_data() == (websocket.ABNF.OPCODE_TEXT, b"text:hi")
    client.send_binary(b"\x00\x01\x02")
    assert client.recv_data() == (websocket.ABNF.OPCODE_BINARY, b"\x02\x01\x00")
    client.close()


def test_an_object_hibernates_between_messages_and_keeps_its_clients(server: Server) -> None:
    """Idle past the eviction time (virtual), the object is dropped; the next message
    builds a new instance that still knows the socket's attachment."""
    ann = server.connect("user=ann")
    bob = server.connect("user=bob")
    ann.send("who")
    assert ann.recv() == "#1 ann"
    server.advance(61_000)
    bob.send("who")
    assert bob.recv() == "#2 bob"
    ann.send("who")
    assert ann.recv() == "#2 ann"
    ann.close()
    bob.close()


def test_close_codes_reach_the_object_and_the_client(server: Server) -> None:
    """A client's code and reason reach `webSocketClose`; a dropped connection arrives
    as 1006, not clean; the object's own close reaches the client with its code."""
    ann = server.connect("user=ann&room=closes")
    ann.close(status=4001, reason=b"leaving")
    dropped = server.connect("user=bob&room=closes")
    assert dropped.sock is not None
    dropped.sock.shutdown(socket.SHUT_RDWR)
    dropped.sock.close()
    carl = server.connect("user=carl&room=closes")
    carl.send("close 4002 done")
    opcode, frame = carl.recv_data_frame(True)
    assert (opcode, frame.data) == (websocket.ABNF.OPCODE_CLOSE, (4002).to_bytes(2) + b"done")
    carl.close()
    expected = [
        [4001, "leaving", True],
        [1006, "WebSocket disconnected without sending Close frame.", False],
        [4002, "done", True],
    ]
    closes: list[Any] = []
    for _ in range(200):
        closes = server.get("/closes?room=closes")
        if len(closes) == len(expected):
            break
        server.advance(0)
    assert closes == expected


def test_a_refused_upgrade_gets_the_worker_s_http_answer(server: Server) -> None:
    """A handshake the worker answers without 101 fails with that status (404, or 500
    when the worker raised)."""
    for path, status in (("/nope", 404), ("/boom", 500)):
        with pytest.raises(websocket.WebSocketBadStatusException) as refused:
            websocket.create_connection(server.ws + path, timeout=30)
        assert refused.value.status_code == status


def test_a_restart_drops_connections_and_the_client_reconnects(server: Server) -> None:
    """Stopping the server closes each socket (1012, service restart); after a restart
    on the same path, a client reconnects and what the object stored is still there."""
    server.connect("user=bob&room=restart").close(status=4001, reason=b"early")
    ann = server.connect("user=ann&room=restart")
    ann.send("who")
    assert ann.recv() == "#1 ann"
    server.stop()
    opcode, frame = ann.recv_data_frame(True)
    assert (opcode, frame.data[:2]) == (websocket.ABNF.OPCODE_CLOSE, (1012).to_bytes(2))
    again = Server(server.project, server.data)
    try:
        ann = again.connect("user=ann&room=restart")
        ann.send("who")
        assert ann.recv() == "#1 ann"
        assert again.get("/closes?room=restart") == [[4001, "early", True]]
        ann.close()
    finally:
        again.stop()
