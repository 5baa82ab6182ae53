"""examples/chat_room under `durability serve`: hibernation mid-conversation, a member
reconnecting, and a server restart, with real WebSocket clients."""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path

import pytest

from _chat_checks import ChatClient, summary
from _served import free_port, start, stop

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.name != "posix", reason="stops the server with SIGINT"),
]

CHAT_ROOM = Path(__file__).resolve().parent.parent / "examples" / "chat_room"


def advance(base_url: str, ms: int) -> None:
    request = urllib.request.Request(f"{base_url}/_durability/advance?ms={ms}", method="POST")
    urllib.request.urlopen(request, timeout=30).close()


def test_a_room_keeps_its_members_through_hibernation_reconnects_and_restarts(
    tmp_path: Path,
) -> None:
    """The room hibernates while its members stay connected and keeps serving them; a
    member who reconnects gets the history; after a restart the messages are still
    there and the room starts empty of members."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start(CHAT_ROOM, tmp_path / "data", port, "--virtual-time")
    try:
        ann = ChatClient(base, "lobby", "ann")
        ann.event()
        bob = ChatClient(base, "lobby", "bob")
        bob.event(), ann.event()
        ann.say("before the nap")
        assert bob.event()["text"] == ann.event()["text"] == "before the nap"
        advance(base, 61_000)
        bob.say("after the nap")
        assert ann.event() == {"type": "message", "seq": 2, "user": "bob", "text": "after the nap"}
        bob.event()
        assert summary(base, "lobby") == {"members": ["ann", "bob"], "messages": 2}
        bob.close()
        assert ann.event() == {"type": "left", "user": "bob"}
        bob = ChatClient(base, "lobby", "bob")
        welcome = bob.event()
        assert welcome["members"] == ["ann", "bob"]
        assert [m["text"] for m in welcome["history"]] == ["before the nap", "after the nap"]
    finally:
        stop(server)
    server = start(CHAT_ROOM, tmp_path / "data", port, "--virtual-time")
    try:
        assert summary(base, "lobby") == {"members": [], "messages": 2}
        carl = ChatClient(base, "lobby", "carl")
        assert len(carl.event()["history"]) == 2
        carl.close()
    finally:
        stop(server)
