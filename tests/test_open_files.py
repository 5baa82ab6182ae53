"""The cap on open object files: idle live objects keep their state, their file is closed
and reopened on next use, and they see exactly their committed data."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from conftest import MakeRuntime
from durability.runtime import DurableObject, Runtime
from durability.runtime._opening import open_object_file
from durability.runtime._pool import OpenDatabases
from durability.testing import VirtualClock


class Keeper(DurableObject):
    """Rows in its file and a count in memory, to tell reopening from rebuilding."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS rows (v INTEGER)")
        self.calls = 0
        env.BUILT.append(str(ctx.id.name))

    async def add(self, value: int) -> list[int]:
        self.calls += 1
        self.ctx.storage.sql.exec("INSERT INTO rows (v) VALUES (?)", value)
        return [row["v"] for row in self.ctx.storage.sql.exec("SELECT v FROM rows ORDER BY v")]

    async def add_then_wait(self, value: int) -> int:
        self.ctx.storage.sql.exec("INSERT INTO rows (v) VALUES (?)", value)
        await self.ctx.storage.sync()
        await self.env.GATE.wait()
        return len(self.ctx.storage.sql.exec("SELECT v FROM rows").to_list())

    async def arm(self, at_ms: int) -> None:
        await self.ctx.storage.set_alarm(at_ms)

    async def alarm(self) -> None:
        self.ctx.storage.sql.exec("INSERT INTO rows (v) VALUES (-1)")
        await self.ctx.storage.sync()
        self.env.FIRED.set()

    async def seen(self) -> list[Any]:
        rows = self.ctx.storage.sql.exec("SELECT v FROM rows ORDER BY v")
        return [self.calls, [row["v"] for row in rows]]


def open_object_files(root: Path) -> set[str]:
    """Object database files this process holds open now (from /proc/self/fd)."""
    names = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(root / "K")) and target.endswith(".sqlite3"):
            names.add(Path(target).name)
    return names


def env(built: list[str], gate: asyncio.Event | None = None) -> dict[str, object]:
    return {"K": Keeper, "BUILT": built, "GATE": gate or asyncio.Event(), "FIRED": asyncio.Event()}


async def test_past_the_cap_idle_files_close_and_reopen_with_their_data(
    tmp_path: Path, clock: VirtualClock, make_runtime: MakeRuntime
) -> None:
    """With 5 live objects and max_open_databases=2, at most 2 files are open; each object
    keeps its in-memory state and reads exactly its own committed rows after a reopen."""
    built: list[str] = []
    async with make_runtime(path=tmp_path, bindings=env(built), max_open_databases=2) as rt:
        stubs = [rt.env.K.get_by_name(f"k{number}") for number in range(5)]
        for round_ in range(3):
            for number, stub in enumerate(stubs):
                await stub.add(10 * number + round_)
                assert len(open_object_files(tmp_path)) <= 2
        for number, stub in enumerate(stubs):
            assert await stub.seen() == [3, [10 * number, 10 * number + 1, 10 * number + 2]]
        assert built == [f"k{number}" for number in range(5)]
    async with make_runtime(path=tmp_path, bindings=env([])) as rt:
        assert await rt.env.K.get_by_name("k3").seen() == [0, [30, 31, 32]]


async def test_a_busy_object_keeps_its_file_open_past_the_cap(
    tmp_path: Path, clock: VirtualClock, make_runtime: MakeRuntime
) -> None:
    """An object in the middle of a call is not closed for the cap (the cap is exceeded
    meanwhile); once idle, it is the next to close."""
    gate = asyncio.Event()
    async with make_runtime(path=tmp_path, bindings=env([], gate), max_open_databases=1) as rt:
        busy = rt.env.K.get_by_name("busy")
        waiting = asyncio.ensure_future(busy.add_then_wait(1))
        await clock.advance(0)
        for number in range(3):
            await rt.env.K.get_by_name(f"o{number}").add(number)
        busy_file = f"{busy.id}.sqlite3"
        assert busy_file in open_object_files(tmp_path)
        gate.set()
        assert await waiting == 1
        await rt.env.K.get_by_name("o0").add(5)
        assert open_object_files(tmp_path) == {f"{rt.env.K.id_from_name('o0')}.sqlite3"}
        assert await busy.seen() == [0, [1]]


async def test_a_database_with_a_transaction_open_is_not_closed(tmp_path: Path) -> None:
    """Uncommitted writes keep their connection: the cap waits until they are committed."""
    loop = asyncio.get_running_loop()
    pool = OpenDatabases(1, None)
    first = open_object_file(loop, tmp_path, ("K", "a" * 64))
    pool.add(first)
    commit = first.join()
    first.execute("CREATE TABLE t (v INTEGER)")
    second = open_object_file(loop, tmp_path, ("K", "b" * 64))
    pool.add(second)
    assert len(pool) == 2 and len(open_object_files(tmp_path)) == 2
    await commit
    third = open_object_file(loop, tmp_path, ("K", "c" * 64))
    pool.add(third)
    assert len(pool) == 1 and len(open_object_files(tmp_path)) == 1
    assert first.query("SELECT count(*) FROM t") == [(0,)]
    assert len(pool) == 1
    for database in (first, second, third):
        database.close()
    assert len(pool) == 0 and open_object_files(tmp_path) == set()


async def test_real_clock_closes_in_the_background_and_alarms_reach_closed_files(
    tmp_path: Path,
) -> None:
    """On the real clock files close in worker threads; an alarm due on an object whose
    file was closed reopens it; a restart finds every committed row."""
    bindings = env([])
    async with Runtime(path=tmp_path, bindings=bindings, max_open_databases=2) as rt:
        stubs = [rt.env.K.get_by_name(f"k{number}") for number in range(6)]
        for number, stub in enumerate(stubs):
            await stub.add(number)
        await stubs[0].arm(rt.now_ms() + 50)
        for number, stub in enumerate(stubs[1:], 1):
            await stub.add(100 + number)
        fired = bindings["FIRED"]
        assert isinstance(fired, asyncio.Event)
        await fired.wait()
    async with Runtime(path=tmp_path, bindings=env([]), max_open_databases=2) as rt:
        seen = [await rt.env.K.get_by_name(f"k{number}").seen() for number in range(6)]
    assert seen[0] == [0, [-1, 0]]
    assert seen[1:] == [[0, [number, 100 + number]] for number in range(1, 6)]
    assert open_object_files(tmp_path) == set()
