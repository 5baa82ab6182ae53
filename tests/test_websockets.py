"""WebSockets on the embedded runtime: pairs, the upgrade response, the Hibernation API.

Each behaviour pinned here was measured on a local workerd (both Python SDKs); the
messages of the errors are workerd's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from _ws_room import Client, Room, connect, reset_room
from conftest import START_MS
from durability.runtime import (
    Response,
    Runtime,
    WebSocket,
    WebSocketPair,
)
from durability.testing import VirtualClock


@pytest.fixture
async def rt(clock: VirtualClock) -> AsyncIterator[Runtime]:
    reset_room()
    async with Runtime(bindings={"ROOMS": Room}, clock=clock) as runtime:
        yield runtime


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


# -- pairs ---------------------------------------------------------------------------


async def test_a_pair_unpacks_and_indexes_as_on_cloudflare() -> None:
    """`WebSocketPair()`, `.new()`, unpacking, `object_values()` and indexing agree."""
    pair = WebSocketPair.new()
    client, server = pair
    assert (pair[0], pair[1]) == (client, server) == pair.object_values()
    assert client.readyState == server.readyState == WebSocket.OPEN == 1


async def test_sending_before_accept_raises_workerd_error() -> None:
    """Neither end may send before it was accepted, with workerd's TypeError message."""
    client, server = WebSocketPair()
    for end in (client, server):
        with pytest.raises(TypeError, match=r"You must call one of accept\(\) or state"):
            end.send("early")


async def test_messages_flow_both_ways_in_order_and_wait_for_accept() -> None:
    """What an end sends before its peer accepted waits, then arrives in order."""
    client_end, server = WebSocketPair()
    server.accept()
    server.send("one")
    server.send(b"\x00two")
    client = Client(client_end)
    assert await client.text() == "one"
    binary = await client.text()
    assert binary == b"\x00two" and binary.to_bytes() == b"\x00two" and binary.byteLength == 4
    received: list[object] = []
    server.addEventListener("message", lambda event: received.append(event.data))
    client_end.send("back")
    await settle()
    assert received == ["back"]


async def test_send_takes_str_or_bytes_only() -> None:
    """Other values are refused here (Cloudflare would send their JavaScript text)."""
    _, server = WebSocketPair()
    server.accept()
    with pytest.raises(TypeError, match="str or bytes, got int"):
        server.send(5)


async def test_close_codes_follow_workerd_rules() -> None:
    """Codes outside 1000-4999, or 1004-1006 and 1015, raise as workerd's do."""
    for code in (999, 1004, 1005, 1006, 1015, 5000):
        _, server = WebSocketPair()
        with pytest.raises(ValueError, match=f"Invalid WebSocket close code: {code}."):
            server.close(code, "x")
    for code in (1000, 1001, 1012, 2999, 4999):
        _, server = WebSocketPair()
        server.close(code)


async def test_close_handshake_moves_ready_state_and_stops_sends() -> None:
    """Closing one end: CLOSING until the peer closes too, then CLOSED; send raises."""
    client_end, server = WebSocketPair()
    server.accept()
    client = Client(client_end)
    server.close(4000, "done")
    assert server.readyState == WebSocket.CLOSING
    with pytest.raises(TypeError, match=r"Can't call WebSocket send\(\) after close\(\)."):
        server.send("late")
    event = await client.next()
    assert (event.type, event.code, event.reason, event.wasClean) == ("close", 4000, "done", True)
    assert client_end.readyState == WebSocket.CLOSING
    client_end.close()
    assert client_end.readyState == server.readyState == WebSocket.CLOSED
    server.close(1000)


async def test_close_without_code_arrives_as_1005() -> None:
    """`close()` with no code reaches the peer as 1005 and an empty reason."""
    client_end, server = WebSocketPair()
    server.accept()
    client = Client(client_end)
    server.close()
    event = await client.next()
    assert (event.code, event.reason) == (1005, "")


# -- the upgrade response ------------------------------------------------------------


async def test_response_101_needs_a_websocket_and_no_body() -> None:
    """Status 101 only with `web_socket`, a WebSocket only with 101, and no body."""
    client, _ = WebSocketPair()
    assert Response(None, status=101, web_socket=client).web_socket is client
    with pytest.raises(ValueError, match="range 200 to 599"):
        Response(None, status=101)
    with pytest.raises(ValueError, match="must have status code 101"):
        Response(None, status=200, web_socket=client)
    with pytest.raises(TypeError, match="null body status"):
        Response("body", status=101, web_socket=client)


async def test_stub_fetch_without_upgrade_reaches_the_object(rt: Runtime) -> None:
    """`stub.fetch(request)` calls the object's own `fetch` and returns its Response."""
    response = await rt.env.ROOMS.getByName("a").fetch("http://room/")
    assert (response.status, await response.text()) == (426, "expected a WebSocket upgrade")


# -- the Hibernation API --------------------------------------------------------------


async def test_hibernation_handlers_get_text_and_binary_messages(rt: Runtime) -> None:
    """`webSocketMessage` gets a `str` for text and bytes with `to_bytes()` for binary."""
    stub = rt.env.ROOMS.getByName("a")
    ann = await connect(stub, "user=ann&tags=room")
    assert await ann.text() == "welcome #1"
    ann.end.send("hi")
    assert await ann.text() == "ann: hi"
    ann.end.send(b"abc")
    assert await ann.text() == b"cba"


async def test_tags_select_sockets_and_attachments_are_json_copies(rt: Runtime) -> None:
    """`getWebSockets(tag)`, `getTags(ws)`, and attachments read back as fresh copies."""
    stub = rt.env.ROOMS.getByName("a")
    ann = await connect(stub, "user=ann&tags=room,admin")
    bob = await connect(stub, "user=bob&tags=room")
    await ann.text(), await bob.text()
    ann.end.send("who")
    assert await ann.text() == "#1 ann,bob"
    ann.end.send("hello")
    assert await ann.text() == await bob.text() == "ann: hello"
    assert await stub.count() == 2
    _, server = WebSocketPair()
    server.serializeAttachment({"n": [1, 2]})
    first = server.deserializeAttachment()
    first["n"].append(3)
    assert server.deserializeAttachment() == {"n": [1, 2]}
    with pytest.raises(TypeError):
        server.serializeAttachment({1, 2})
    with pytest.raises(RuntimeError, match="cannot be larger than 16384 bytes"):
        server.serializeAttachment("x" * 16_383)


class Strict(Room):
    """Calls the Hibernation API with the values workerd refuses."""

    async def bad(self, case: str) -> str:
        _, server = WebSocketPair()
        try:
            if case == "long-tag":
                self.ctx.acceptWebSocket(server, ["x" * 257])
            elif case == "many-tags":
                self.ctx.acceptWebSocket(server, [str(n) for n in range(11)])
            elif case == "accept-then-hibernate":
                server.accept()
                self.ctx.acceptWebSocket(server)
            elif case == "hibernate-then-accept":
                self.ctx.acceptWebSocket(server)
                server.accept()
            elif case == "tags-of-unaccepted":
                self.ctx.getTags(server)
        except Exception as error:
            return f"{type(error).__name__}: {error}"
        return "ok"


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("long-tag", 'JsException: Error: "' + "x" * 257 + '" is longer than the max tag'),
        ("many-tags", "JsException: Error: a Hibernatable WebSocket cannot have more than 10 tags"),
        (
            "accept-then-hibernate",
            "JsException: Error: Cannot call `acceptWebSocket()` if the WebSocket was already "
            "accepted via `accept()`",
        ),
        ("hibernate-then-accept", "JsException: TypeError: Can't accept() WebSocket after"),
        ("tags-of-unaccepted", "JsException: Error: you must call 'acceptWebSocket()' before"),
    ],
)
async def test_hibernation_api_refuses_what_workerd_refuses(
    clock: VirtualClock, case: str, expected: str
) -> None:
    """Tag limits and mixing `accept()` with `acceptWebSocket()` raise workerd's errors."""
    async with Runtime(bindings={"STRICT": Strict}, clock=clock) as runtime:
        assert (await runtime.env.STRICT.getByName("s").bad(case)).startswith(expected)


async def test_auto_response_answers_without_waking_the_object(
    rt: Runtime, clock: VirtualClock
) -> None:
    """A message equal to the pair's request gets its response, even while the object
    is evicted (no new instance), and its time is kept per socket."""
    stub = rt.env.ROOMS.getByName("a")
    ann = await connect(stub, "user=ann&tags=room")
    await ann.text()
    await stub.set_auto("ping", "pong")
    assert await stub.auto_state() == ["pong", None]
    await rt.evict(stub)
    await clock.advance(5_000)
    ann.end.send("ping")
    assert await ann.text() == "pong"
    assert Room.built == 1
    ann.end.send("who")
    assert await ann.text() == "#2 ann"
    assert await stub.auto_state() == ["pong", START_MS + 5_000]


async def test_client_close_reaches_web_socket_close_then_the_socket_is_gone(
    rt: Runtime,
) -> None:
    """The client's code and reason reach `webSocketClose` (readyState CLOSING there, the
    socket still listed); the handler's close answers it; then it is no longer listed."""
    stub = rt.env.ROOMS.getByName("a")
    ann = await connect(stub, "user=ann")
    bob = await connect(stub, "user=bob")
    await ann.text(), await bob.text()
    ann.end.close(4001, "leaving")
    event = await ann.next()
    assert (event.type, event.code, event.reason) == ("close", 4001, "bye")
    assert Room.closes == [(4001, "leaving", True, WebSocket.CLOSING, 2)]
    assert await stub.count() == 1


async def test_a_raising_handler_leaves_the_socket_open(
    rt: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    """An exception in `webSocketMessage` is logged; the socket and instance stay."""
    stub = rt.env.ROOMS.getByName("a")
    ann = await connect(stub, "user=ann")
    await ann.text()
    ann.end.send("raise")
    ann.end.send("who")
    assert await ann.text() == "#1 ann"
    assert "webSocketMessage raised" in caplog.text
