"""WebSockets across an object's lifecycle: eviction, hibernation, crash, runtime close."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from _ws_room import Room, connect, reset_room
from durability.runtime import Runtime
from durability.testing import VirtualClock

IDLE_MS = 10_000


@pytest.fixture
async def rt(clock: VirtualClock, tmp_path: Path) -> AsyncIterator[Runtime]:
    reset_room()
    runtime = Runtime(
        path=tmp_path / "data", bindings={"ROOMS": Room}, clock=clock, idle_evict_ms=IDLE_MS
    )
    async with runtime:
        yield runtime


async def test_hibernatable_sockets_survive_eviction_with_their_attachments(
    rt: Runtime,
) -> None:
    """After `rt.evict`, the next message builds a new instance that lists the same
    sockets, tags and attachments, and the clients never notice."""
    stub = rt.env.ROOMS.getByName("a")
    ann = await connect(stub, "user=ann&tags=room")
    bob = await connect(stub, "user=bob&tags=room")
    await ann.text(), await bob.text()
    await rt.evict(stub)
    assert Room.built == 1
    bob.end.send("who")
    assert await bob.text() == "#2 ann,bob"
    ann.end.send("still here")
    assert await ann.text() == await bob.text() == "ann: still here"
    assert Room.built == 2


async def test_an_idle_object_hibernates_and_wakes_on_the_next_message(
    rt: Runtime, clock: VirtualClock
) -> None:
    """Hibernatable sockets do not keep an idle object live; a message wakes it."""
    stub = rt.env.ROOMS.getByName("a")
    ann = await connect(stub, "user=ann")
    await ann.text()
    await clock.advance(IDLE_MS + 1)
    assert rt._live.get(("ROOMS", str(stub.id))) is None
    ann.end.send("who")
    assert await ann.text() == "#2 ann"


async def test_a_standard_socket_keeps_its_object_live_until_it_closes(
    rt: Runtime, clock: VirtualClock
) -> None:
    """An object holding an `accept()`ed socket is not evicted while idle; once the
    socket closed, it is."""
    stub = rt.env.ROOMS.getByName("a")
    ann = await connect(stub, "mode=std")
    await clock.advance(IDLE_MS * 3)
    ann.end.send("x")
    assert await ann.text() == "echo:x"
    assert Room.built == 1
    ann.end.close(1000, "done")
    await clock.advance(IDLE_MS * 3)
    assert rt._live.get(("ROOMS", str(stub.id))) is None


async def test_evicting_an_object_closes_its_standard_sockets_with_1001(rt: Runtime) -> None:
    """Standard sockets belong to the instance: eviction closes them (going away)."""
    stub = rt.env.ROOMS.getByName("a")
    ann = await connect(stub, "mode=std")
    await rt.evict(stub)
    event = await ann.next()
    assert (event.type, event.code, event.reason) == ("close", 1001, "Durable Object evicted")


async def test_a_crash_resets_the_object_and_closes_its_sockets_with_1011(rt: Runtime) -> None:
    """A crashed object loses its hibernatable sockets: clients get 1011."""
    stub = rt.env.ROOMS.getByName("a")
    ann = await connect(stub, "user=ann")
    await ann.text()
    await rt.crash(stub)
    event = await ann.next()
    assert (event.type, event.code, event.reason) == ("close", 1011, "Durable Object reset")
    assert await stub.count() == 0


async def test_closing_the_runtime_closes_every_socket_with_1001(clock: VirtualClock) -> None:
    """Runtime close says "going away" to every hibernatable socket's client."""
    reset_room()
    async with Runtime(bindings={"ROOMS": Room}, clock=clock) as runtime:
        ann = await connect(runtime.env.ROOMS.getByName("a"), "user=ann")
        await ann.text()
    event = await ann.next()
    assert (event.type, event.code) == ("close", 1001)


async def test_a_close_during_eviction_still_reaches_a_new_instance(rt: Runtime) -> None:
    """A client closing while the object is evicted wakes it for `webSocketClose`."""
    stub = rt.env.ROOMS.getByName("a")
    ann = await connect(stub, "user=ann")
    await ann.text()
    await rt.evict(stub)
    ann.end.close(4000, "gone")
    event = await ann.next()
    assert (event.code, event.reason) == (4000, "bye")
    assert Room.built == 2
    assert Room.closes[0][:3] == (4000, "gone", True)
