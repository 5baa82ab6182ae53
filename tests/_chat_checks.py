"""End-to-end checks of examples/chat_room with real WebSocket clients, on any host.

`check_chat_room(base_url)` runs against `durability serve examples/chat_room` (see
`test_chat_room.py`) and against the same project on a real workerd
(`scripts/workerd-smoke`). It needs the `websocket-client` package.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from typing import Any

import websocket

TIMEOUT_S = 30


class ChatClient:
    """One member's connection: JSON events in, `say`/`whisper` out."""

    def __init__(self, base_url: str, room: str, user: str) -> None:
        url = f"{base_url.replace('http', 'ws', 1)}/rooms/{room}/ws?user={user}"
        self.user = user
        self.socket = websocket.create_connection(url, timeout=TIMEOUT_S)

    def event(self) -> Any:
        """The next event the room sent (JSON), or the raw text when it is not JSON."""
        opcode, data = self.socket.recv_data()
        if opcode != websocket.ABNF.OPCODE_TEXT:
            raise AssertionError(f"{self.user}: expected a text frame, got opcode {opcode}")
        text = data.decode()
        return json.loads(text) if text.startswith("{") else text

    def say(self, text: str) -> None:
        self.socket.send(json.dumps({"say": text}))

    def whisper(self, to: str, text: str) -> None:
        self.socket.send(json.dumps({"to": to, "say": text}))

    def close(self, code: int = 1000) -> None:
        self.socket.close(status=code)


def _expect(actual: Any, expected: Any, what: str) -> None:
    if actual != expected:
        raise AssertionError(f"{what}: expected {expected!r}, got {actual!r}")


def summary(base_url: str, room: str) -> Any:
    """GET /rooms/ROOM: the members and the message count."""
    with urllib.request.urlopen(f"{base_url}/rooms/{room}", timeout=TIMEOUT_S) as response:
        return json.loads(response.read())


def check_chat_room(base_url: str) -> None:
    """Members join and see each other, messages reach everyone in order, whispers reach
    the tagged member only, "ping" gets "pong", a leaver is announced, and a newcomer
    gets the history."""
    room = f"room-{uuid.uuid4().hex[:8]}"
    ann = ChatClient(base_url, room, "ann")
    _expect(
        ann.event(),
        {"type": "welcome", "user": "ann", "members": ["ann"], "history": []},
        "ann's welcome",
    )
    bob = ChatClient(base_url, room, "bob")
    _expect(bob.event()["members"], ["ann", "bob"], "bob's welcome lists both")
    _expect(ann.event(), {"type": "joined", "user": "bob"}, "ann hears bob join")
    ann.say("hello")
    bob.say("hi ann")
    for member in (ann, bob):
        _expect(
            [member.event(), member.event()],
            [
                {"type": "message", "seq": 1, "user": "ann", "text": "hello"},
                {"type": "message", "seq": 2, "user": "bob", "text": "hi ann"},
            ],
            f"{member.user} gets both messages in order",
        )
    carl = ChatClient(base_url, room, "carl")
    _expect(len(carl.event()["history"]), 2, "carl's welcome has the history")
    ann.event(), bob.event()
    bob.whisper("carl", "psst")
    whisper = {"type": "whisper", "from": "bob", "to": "carl", "text": "psst"}
    _expect(carl.event(), whisper, "carl gets the whisper")
    _expect(bob.event(), whisper, "bob sees his whisper")
    bob.whisper("zed", "hello?")
    _expect(bob.event(), {"type": "error", "error": "zed is not here"}, "whisper to nobody")
    ann.socket.send("ping")
    _expect(ann.event(), "pong", "the auto-response answers ping")
    _expect(summary(base_url, room), {"members": ["ann", "bob", "carl"], "messages": 2}, "summary")
    bob.close()
    _expect(ann.event(), {"type": "left", "user": "bob"}, "ann hears bob leave")
    _expect(carl.event(), {"type": "left", "user": "bob"}, "carl hears bob leave")
    ann.say("bye")
    _expect(carl.event()["seq"], 3, "messages go on after a member left")
    ann.close()
    carl.close()
