"""Storage failures on the file-backed runtime: the caller learns the real error,
the path and the alarms survive, and work resumes once the disk is healthy."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from conftest import MakeRuntime
from durability import now_ms
from durability.runtime import AlarmInvocationInfo, DurableObject, Runtime
from durability.testing import VirtualClock

from ._inject import StorageFaults


class Notes(DurableObject):
    """Writes KV pairs and arms its alarm; records every alarm it receives."""

    async def put(self, key: str, value: int) -> int:
        await self.ctx.storage.put(key, value)
        return value

    async def get(self, key: str) -> Any:
        return await self.ctx.storage.get(key)

    async def arm(self, at_ms: int) -> None:
        await self.ctx.storage.set_alarm(at_ms)

    async def alarm(self, info: AlarmInvocationInfo) -> None:
        self.env.FIRED.append((self.ctx.id.name, now_ms(), info.retry_count))


def bindings(fired: list[Any]) -> dict[str, object]:
    return {"NOTES": Notes, "FIRED": fired}


async def test_failed_commit_reports_its_own_error(
    tmp_path: Path, faults: StorageFaults, clock: VirtualClock, make_runtime: MakeRuntime
) -> None:
    """A call whose COMMIT fails gets the commit's error, not ObjectEvictedError."""
    async with make_runtime(path=tmp_path, bindings=bindings([])) as rt:
        stub = rt.env.NOTES.get_by_name("a")
        assert await stub.put("k", 1) == 1
        faults.fail("NOTES", "COMMIT")
        with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
            await stub.put("k", 2)
        assert await stub.get("k") == 1
        assert await stub.put("k", 3) == 3
        assert await stub.get("k") == 3


async def test_failed_close_still_releases_the_path(
    tmp_path: Path, faults: StorageFaults, clock: VirtualClock, make_runtime: MakeRuntime
) -> None:
    """When close() fails it raises, yet the path is free and nothing stays open."""
    rt = Runtime(path=tmp_path, bindings=bindings([]), clock=clock)
    await rt.start()
    await rt.env.NOTES.get_by_name("a").arm(clock.now_ms() + 60_000)
    # b's file is new, so its commit does not wait for the catalog; every catalog write
    # from here on fails (b's settled entry, then the one at close).
    faults.fail("_catalog", "BEGIN", times=100)
    await rt.env.NOTES.get_by_name("b").arm(clock.now_ms() + 30_000)
    with pytest.raises(sqlite3.OperationalError):
        await rt.close()
    await rt.close()
    faults.stop()
    fired: list[Any] = []
    async with make_runtime(path=tmp_path, bindings=bindings(fired)) as again:
        assert await again.env.NOTES.get_by_name("b").get("k") is None
        await clock.advance(60_000)
    assert sorted(name for name, _, _ in fired) == ["a", "b"]


async def test_failed_alarm_bookkeeping_is_retried_with_backoff(
    tmp_path: Path, faults: StorageFaults, clock: VirtualClock, make_runtime: MakeRuntime
) -> None:
    """An alarm whose delivery cannot record its outcome is retried with backoff, not lost."""
    fired: list[Any] = []
    async with make_runtime(path=tmp_path, bindings=bindings(fired)) as rt:
        stub = rt.env.NOTES.get_by_name("a")
        start = clock.now_ms()
        await stub.arm(start + 1_000)
        # The first delivery's commit (with alarm()'s effects) passes; every later
        # commit of the object fails for a minute.
        rule = faults.fail("NOTES", "COMMIT", skip=1, times=1_000)
        for _ in range(60):
            await clock.advance(1_000)
        assert [(at - start, retry) for _, at, retry in fired][:1] == [(1_000, 0)]
        assert 3 <= rule.failed <= 6
        faults.stop()
        await clock.advance(200_000)
        assert len(fired) >= 2
        assert fired[-1][2] >= 1
        fired.clear()
        await clock.advance(600_000)
        assert fired == []
        assert await stub.put("k", 1) == 1


async def test_corrupt_object_file_is_named_and_others_keep_working(
    tmp_path: Path, clock: VirtualClock, make_runtime: MakeRuntime
) -> None:
    """A corrupt object file raises an error naming the object and the file; others work."""
    async with make_runtime(path=tmp_path, bindings=bindings([])) as rt:
        await rt.env.NOTES.get_by_name("bad").put("k", 1)
        await rt.env.NOTES.get_by_name("good").put("k", 2)
        object_id = str(rt.env.NOTES.id_from_name("bad"))
    file = tmp_path / "NOTES" / f"{object_id}.sqlite3"
    file.write_bytes(b"this is not a database" * 200)
    async with make_runtime(path=tmp_path, bindings=bindings([])) as rt:
        for _ in range(2):
            with pytest.raises(sqlite3.DatabaseError) as caught:
                await rt.env.NOTES.get_by_name("bad").get("k")
            assert f"NOTES:{object_id}" in str(caught.value)
            assert str(file) in str(caught.value)
        assert await rt.env.NOTES.get_by_name("good").get("k") == 2


async def test_catalog_entry_of_a_failed_write_is_written_by_the_next_arm(
    tmp_path: Path, faults: StorageFaults, clock: VirtualClock, make_runtime: MakeRuntime
) -> None:
    """After a catalog write fails, arming again has the entry on disk before the commit."""
    async with make_runtime(path=tmp_path, bindings=bindings([])) as rt:
        stub = rt.env.NOTES.get_by_name("a")
        # A file created in this run does not wait for its entry: reopen it first.
        assert await stub.get("k") is None
        await rt.evict(stub)
        at = clock.now_ms() + 5_000
        faults.fail("_catalog", "INSERT INTO alarms")
        with pytest.raises(sqlite3.OperationalError):
            await stub.arm(at)
        seen_at_commit: list[Any] = []

        def read_catalog() -> None:
            catalog = sqlite3.connect(f"file:{tmp_path / '_catalog.sqlite3'}?mode=ro", uri=True)
            seen_at_commit.append(catalog.execute("SELECT wake_ms FROM alarms").fetchall())
            catalog.close()

        faults.watch("NOTES", "COMMIT", read_catalog)
        await stub.arm(at)
        # The last commit is the arm's (opening the object may commit its own tables).
        assert seen_at_commit[-1] == [(at,)]
