"""File-backed runtime: restart keeps data and alarms, the path lock, the output gate."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from durability import now_ms
from durability.runtime import AlarmInvocationInfo, DurableObject, PathInUseError, Runtime
from durability.testing import VirtualClock

if TYPE_CHECKING:  # a child process imports this module without the tests' conftest
    from conftest import MakeRuntime, Restart


class Ledger(DurableObject):
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS entries (n INTEGER)")

    async def add(self, n: int) -> int:
        self.ctx.storage.sql.exec("INSERT INTO entries VALUES (?)", n)
        return n

    async def entries(self) -> list[int]:
        return [row["n"] for row in self.ctx.storage.sql.exec("SELECT n FROM entries")]

    async def remember(self, key: str, value: Any, alarm_ms: int | None) -> None:
        await self.ctx.storage.put(key, value)
        if alarm_ms is not None:
            await self.ctx.storage.set_alarm(alarm_ms)

    async def forget_alarm(self) -> None:
        await self.ctx.storage.delete_alarm()

    async def recall(self, key: str) -> Any:
        return [await self.ctx.storage.get(key), await self.ctx.storage.get_alarm()]

    async def alarm(self, info: AlarmInvocationInfo) -> None:
        self.env.FIRED.append((self.ctx.id.name, now_ms(), info.retry_count))


@pytest.fixture
def fired() -> list[Any]:
    """The alarms the objects ran: (name, when, retry count)."""
    return []


@pytest.fixture
def durability_bindings(fired: list[Any]) -> dict[str, object]:
    """Every class of this module, and the list their alarms write to."""
    return {"LEDGER": Ledger, "FIRED": fired, "F": Fragile, "SYNCED": Synced}


@pytest.fixture
def durability_path(tmp_path: Path) -> Path:
    """This module's runtimes keep their objects in files under `tmp_path`."""
    return tmp_path


def object_file(root: Path, rt: Runtime, name: str) -> Path:
    return root / "LEDGER" / f"{rt.env.LEDGER.id_from_name(name)}.sqlite3"


async def test_restart_keeps_data_and_alarms(
    runtime: Runtime, restart: Restart, clock: VirtualClock, fired: list[Any]
) -> None:
    """A new Runtime on the same path finds every object, its data and its armed alarm."""
    start = clock.now_ms()
    for index in range(3):
        stub = runtime.env.LEDGER.get_by_name(f"o{index}")
        await stub.add(index)
        await stub.remember("k", {"i": index}, start + 10_000 * (index + 1))
    await stub.remember("k", {"i": 2}, None)
    rt = await restart()
    stub = rt.env.LEDGER.get_by_name("o2")
    assert await stub.entries() == [2]
    assert await stub.recall("k") == [{"i": 2}, start + 30_000]
    await clock.advance(30_000)
    assert fired == [(f"o{i}", start + 10_000 * (i + 1), 0) for i in range(3)]


async def test_overdue_alarms_fire_at_start(
    runtime: Runtime, restart: Restart, clock: VirtualClock, fired: list[Any]
) -> None:
    """An alarm that came due while no runtime ran fires when the next one starts."""
    await runtime.env.LEDGER.get_by_name("late").remember("k", 1, clock.now_ms() + 5_000)
    clock_later = VirtualClock(start_ms=clock.now_ms() + 3_600_000)
    await restart(clock=clock_later)
    await clock_later.run_until_idle()
    assert fired == [("late", clock_later.now_ms(), 0)]


async def test_deleted_alarm_does_not_fire_after_restart(
    tmp_path: Path, make_runtime: MakeRuntime, clock: VirtualClock, fired: list[Any]
) -> None:
    """An alarm deleted before shutdown stays deleted; its catalog entry is gone."""
    async with make_runtime() as rt:
        stub = rt.env.LEDGER.get_by_name("a")
        await stub.remember("k", 1, clock.now_ms() + 5_000)
        await stub.forget_alarm()
    catalog = sqlite3.connect(tmp_path / "_catalog.sqlite3")
    assert catalog.execute("SELECT count(*) FROM alarms").fetchone() == (0,)
    async with make_runtime() as rt:
        await clock.advance(10_000)
        assert await rt.env.LEDGER.get_by_name("a").recall("k") == [1, None]
    assert fired == []
    catalog.close()


async def test_second_runtime_on_a_path_fails_at_once(tmp_path: Path) -> None:
    """A second Runtime on the same path (same process or another) raises PathInUseError."""
    async with Runtime(path=tmp_path, bindings={"LEDGER": Ledger}):
        with pytest.raises(PathInUseError, match="in use"):
            await Runtime(path=tmp_path, bindings={"LEDGER": Ledger}).start()
        code = (
            "import asyncio, sys\n"
            "from durability.runtime import Runtime, PathInUseError\n"
            "async def main():\n"
            "    try:\n"
            f"        await Runtime(path={str(tmp_path)!r}).start()\n"
            "    except PathInUseError:\n"
            "        sys.exit(7)\n"
            "asyncio.run(main())\n"
        )
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
        assert result.returncode == 7, result.stderr
    async with Runtime(path=tmp_path, bindings={"LEDGER": Ledger}):
        pass


async def test_result_is_released_only_after_commit(tmp_path: Path, runtime: Runtime) -> None:
    """When a call returns, its write is already committed in the object's file."""
    stub = runtime.env.LEDGER.get_by_name("g")
    await stub.entries()
    reader = sqlite3.connect(object_file(tmp_path, runtime, "g"))
    for n in range(5):
        assert await stub.add(n) == n
        assert [r[0] for r in reader.execute("SELECT n FROM entries")] == list(range(n + 1))
    reader.close()


class Fragile(DurableObject):
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS u (k TEXT PRIMARY KEY)")

    async def insert(self, key: str) -> str:
        self.ctx.storage.sql.exec("INSERT INTO u VALUES (?)", key)
        return "ok"

    async def insert_or_rollback(self, key: str) -> str:
        try:
            self.ctx.storage.sql.exec("INSERT OR ROLLBACK INTO u VALUES (?)", key)
        except sqlite3.IntegrityError:
            return "swallowed"
        return "ok"

    async def lost_inside_transaction(self, key: str) -> str:
        def body() -> None:
            self.ctx.storage.sql.exec("INSERT INTO u VALUES ('inside')")
            with contextlib.suppress(sqlite3.IntegrityError):
                self.ctx.storage.sql.exec("INSERT OR ROLLBACK INTO u VALUES (?)", key)
            self.ctx.storage.sql.exec("INSERT INTO u VALUES ('after')")

        self.ctx.storage.transaction_sync(body)
        return "ok"

    async def keys(self) -> list[str]:
        return [row["k"] for row in self.ctx.storage.sql.exec("SELECT k FROM u ORDER BY k")]


async def test_lost_writes_fail_every_call_that_joined_them(runtime: Runtime) -> None:
    """If a turn's writes never commit, every call that wrote in it fails, even if it returned."""
    stub = runtime.env.F.get_by_name("f")
    await stub.insert("a")
    results = await asyncio.gather(
        stub.insert("b"), stub.insert_or_rollback("a"), return_exceptions=True
    )
    assert all(isinstance(r, sqlite3.IntegrityError) for r in results), results
    assert await stub.keys() == ["a"]
    assert await stub.insert("c") == "ok"
    assert await stub.keys() == ["a", "c"]
    with pytest.raises(sqlite3.IntegrityError):
        await stub.lost_inside_transaction("a")
    assert await stub.keys() == ["a", "after", "c"]


async def test_concurrent_writes_share_one_commit(tmp_path: Path, runtime: Runtime) -> None:
    """Many concurrent writing calls are acknowledged after one shared commit, not one each."""
    stub = runtime.env.LEDGER.get_by_name("c")
    await stub.entries()
    file = object_file(tmp_path, runtime, "c")
    reader = sqlite3.connect(file)
    (page_size,) = reader.execute("PRAGMA page_size").fetchone()
    reader.close()
    wal = file.with_name(file.name + "-wal")
    before = wal.stat().st_size
    assert await asyncio.gather(*(stub.add(n) for n in range(200))) == list(range(200))
    frames_written = (wal.stat().st_size - before) // (page_size + 24)
    assert frames_written < 10
    assert len(await stub.entries()) == 200


async def test_writes_and_alarms_survive_a_kill(
    tmp_path: Path, make_runtime: MakeRuntime, fired: list[Any]
) -> None:
    """Acknowledged writes and alarms survive a process that exits without closing."""
    code = (
        "import asyncio, os\n"
        "from durability.runtime import Runtime\n"
        "from durability.testing import VirtualClock\n"
        "from tests.conformance.test_persistence import Ledger\n"
        "async def main():\n"
        "    clock = VirtualClock()\n"
        f"    rt = Runtime(path={str(tmp_path)!r}, bindings={{'LEDGER': Ledger}}, clock=clock)\n"
        "    await rt.start()\n"
        "    stub = rt.env.LEDGER.get_by_name('k')\n"
        "    await asyncio.gather(*(stub.add(n) for n in range(50)))\n"
        "    await stub.remember('key', 'v', clock.now_ms() + 5_000)\n"
        "    os._exit(0)\n"
        "asyncio.run(main())\n"
    )
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, cwd=root)
    assert result.returncode == 0, result.stderr
    clock = VirtualClock(start_ms=VirtualClock().now_ms() + 3_600_000)
    async with make_runtime(clock=clock) as rt:
        await clock.run_until_idle()
        assert fired == [("k", clock.now_ms(), 0)]
        stub = rt.env.LEDGER.get_by_name("k")
        assert sorted(await stub.entries()) == list(range(50))
        assert await stub.recall("key") == ["v", None]


async def test_alarms_of_unbound_classes_wait_for_their_class(
    make_runtime: MakeRuntime, clock: VirtualClock, fired: list[Any]
) -> None:
    """A runtime without an object's class skips its alarm; one with the class fires it."""
    async with make_runtime() as rt:
        await rt.env.LEDGER.get_by_name("a").remember("k", 1, clock.now_ms() + 1_000)
    async with make_runtime(bindings={"FIRED": fired}):
        await clock.advance(10_000)
    assert fired == []
    async with make_runtime():
        await clock.run_until_idle()
    assert fired == [("a", clock.now_ms(), 0)]


class Synced(DurableObject):
    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS marks (n INTEGER)")
        self.seen_before_return: list[int] = []

    async def mark_and_look(self, n: int, file: str) -> list[int]:
        self.ctx.storage.sql.exec("INSERT INTO marks (n) VALUES (?)", n)
        await self.ctx.storage.sync()
        reader = sqlite3.connect(file)
        try:
            return [row[0] for row in reader.execute("SELECT n FROM marks ORDER BY n")]
        finally:
            reader.close()


async def test_sync_waits_until_the_writes_so_far_are_durable(
    tmp_path: Path, runtime: Runtime
) -> None:
    """`await storage.sync()` inside a call returns once its writes are committed to the file."""
    stub = runtime.env.SYNCED.get_by_name("s")
    file = str(tmp_path / "SYNCED" / f"{runtime.env.SYNCED.id_from_name('s')}.sqlite3")
    assert await stub.mark_and_look(1, file) == [1]
    assert await stub.mark_and_look(2, file) == [1, 2]
