"""The output gate as the commit releases it: which results wait, and for which commit.

A write that SQLite rolls back on its own (`INSERT OR ROLLBACK` on a duplicate) loses
the whole pending transaction, so every result gated on that commit must fail with its
error; a result released without waiting would wrongly succeed.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from durability.runtime import DurableObject, ObjectEvictedError, Runtime


class Journal(DurableObject):
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS notes (n INTEGER PRIMARY KEY)")
        self.added = 0

    async def add(self, n: int) -> int:
        self.ctx.storage.sql.exec("INSERT INTO notes VALUES (?)", n)
        self.added += 1
        return n

    async def added_so_far(self) -> int:
        return self.added

    async def notes(self) -> list[int]:
        return [row["n"] for row in self.ctx.storage.sql.exec("SELECT n FROM notes ORDER BY n")]

    async def lose_transaction(self, duplicate: int) -> str:
        try:
            self.ctx.storage.sql.exec("INSERT OR ROLLBACK INTO notes VALUES (?)", duplicate)
        except sqlite3.IntegrityError:
            return "swallowed"
        return "inserted"

    async def add_then_fail(self, n: int) -> None:
        self.ctx.storage.sql.exec("INSERT INTO notes VALUES (?)", n)
        raise LookupError(f"failed after adding {n}")

    async def add_across_turns(self, first: int, second: int) -> int:
        self.ctx.storage.sql.exec("INSERT INTO notes VALUES (?)", first)
        await self.ctx.storage.sync()
        self.ctx.storage.sql.exec("INSERT INTO notes VALUES (?)", second)
        await self.lose_transaction(first)
        return second

    async def evict_self(self) -> None:
        await self.env.WORLD.rt.evict(self.env.WORLD.rt.env.J.get_by_name("j"))


class World:
    rt: Runtime


@pytest.fixture
def world() -> World:
    """Gives a journal its runtime, to evict itself."""
    return World()


@pytest.fixture
def durability_bindings(world: World) -> dict[str, object]:
    return {"J": Journal, "WORLD": world}


@pytest.fixture
def durability_path(tmp_path: Path) -> Path:
    """The output gate is the commit's: these runtimes keep their objects in files."""
    return tmp_path


async def journal(rt: Runtime) -> Any:
    stub = rt.env.J.get_by_name("j")
    assert await stub.add(0) == 0
    return stub


async def test_a_call_without_writes_waits_for_the_writes_it_saw(runtime: Runtime) -> None:
    """A call touching no storage, run while writes are pending, fails if they are lost."""
    stub = await journal(runtime)
    results = await asyncio.gather(
        stub.add(1), stub.added_so_far(), stub.lose_transaction(0), return_exceptions=True
    )
    assert all(isinstance(r, sqlite3.IntegrityError) for r in results), results
    assert await stub.notes() == [0]


async def test_a_call_without_writes_on_an_idle_object_returns(runtime: Runtime) -> None:
    """With nothing pending, a call that touches no storage gets its result at once."""
    stub = await journal(runtime)
    assert await stub.added_so_far() == 1


async def test_a_raising_call_gets_the_commit_error_if_its_writes_are_lost(
    runtime: Runtime,
) -> None:
    """A call's exception waits for its writes; if they are lost, the caller sees why."""
    stub = await journal(runtime)
    outcomes: list[object] = await asyncio.gather(
        stub.add_then_fail(3), stub.lose_transaction(0), return_exceptions=True
    )
    failing, killer = outcomes
    assert isinstance(failing, sqlite3.IntegrityError), failing
    assert isinstance(killer, sqlite3.IntegrityError), killer
    with pytest.raises(LookupError, match="failed after adding 4"):
        await stub.add_then_fail(4)
    assert await stub.notes() == [0, 4]


async def test_a_call_across_turns_waits_for_its_last_commit(runtime: Runtime) -> None:
    """A call whose first commit is durable still fails when its last commit is lost."""
    stub = await journal(runtime)
    with pytest.raises(sqlite3.IntegrityError):
        await stub.add_across_turns(1, 2)
    assert await stub.notes() == [0, 1]


async def test_every_call_gated_on_a_lost_commit_fails(runtime: Runtime) -> None:
    """All calls waiting on one commit get its error; none is acknowledged."""
    stub = await journal(runtime)
    calls = [stub.add(n) for n in range(1, 51)]
    results = await asyncio.gather(*calls, stub.lose_transaction(0), return_exceptions=True)
    assert all(isinstance(r, sqlite3.IntegrityError) for r in results), results
    assert await stub.notes() == [0]
    assert await asyncio.gather(*(stub.add(n) for n in range(1, 51))) == list(range(1, 51))
    assert await stub.notes() == list(range(51))


async def test_eviction_fails_results_still_waiting_for_their_commit(
    runtime: Runtime, world: World
) -> None:
    """A finished call whose commit is pending at eviction fails, but its write is kept."""
    world.rt = runtime
    stub = await journal(runtime)
    outcomes: list[object] = await asyncio.gather(
        stub.add(5), stub.evict_self(), return_exceptions=True
    )
    added, evicted = outcomes
    assert isinstance(added, ObjectEvictedError)
    assert isinstance(evicted, ObjectEvictedError)
    assert await stub.notes() == [0, 5]


async def test_stub_methods_are_built_once_and_names_still_checked(runtime: Runtime) -> None:
    """A stub reuses its caller for a method; private and unknown names keep raising."""
    stub = runtime.env.J.get_by_name("j")
    assert stub.add is stub.add
    assert await stub.add(1) == 1
    other = runtime.env.J.get_by_name("j")
    assert other.add is not stub.add
    assert await other.notes() == [1]
    for _ in range(2):
        with pytest.raises(AttributeError, match="Method _private does not exist"):
            _ = stub._private
        with pytest.raises(AttributeError, match="Method missing does not exist"):
            _ = stub.missing


async def test_a_stub_refuses_attributes_that_would_shadow_its_methods(runtime: Runtime) -> None:
    """Setting or deleting an attribute on a stub raises: a method caller kept on the
    stub must not be replaced by something that is not the remote call."""
    stub = runtime.env.J.get_by_name("j")
    assert await stub.add(1) == 1
    with pytest.raises(AttributeError, match="cannot be set"):
        stub.add = lambda value: value
    with pytest.raises(AttributeError, match="cannot be set"):
        stub.color = "red"
    with pytest.raises(AttributeError, match="cannot be deleted"):
        del stub.add
    assert await stub.add(2) == 2
    assert await stub.notes() == [1, 2]
