"""A new object's file: written whole and renamed into place, tables and WAL mode
included, so the object's first commit holds only its own writes."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from conftest import MakeRuntime
from durability.runtime import DurableObject, Runtime, _opening
from durability.testing import VirtualClock

from ._inject import StorageFaults


class Tally(DurableObject):
    """A table of rows, created by the constructor; an alarm setter."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY)")

    async def add(self, at_ms: int) -> int:
        self.ctx.storage.sql.exec("INSERT INTO rows DEFAULT VALUES")
        await self.ctx.storage.set_alarm(at_ms)
        return int(self.ctx.storage.sql.exec("SELECT count(*) AS n FROM rows").one()["n"])


def _object_file(rt: Runtime, name: str) -> Path:
    assert rt.path is not None
    return rt.path / "T" / f"{rt.env.T.id_from_name(name)}.sqlite3"


async def test_first_call_to_a_new_object_is_one_commit(
    tmp_path: Path, faults: StorageFaults, clock: VirtualClock, make_runtime: MakeRuntime
) -> None:
    """Creating an object costs one commit in its file: its table, row, alarm and name."""
    commits: list[str] = []
    faults.watch("/T/", "COMMIT", lambda: commits.append("commit"))
    async with make_runtime(path=tmp_path, bindings={"T": Tally}) as rt:
        assert await rt.env.T.get_by_name("a").add(clock.now_ms() + 60_000) == 1
        assert commits == ["commit"]
        file = _object_file(rt, "a")
    assert not file.with_name(file.name + _opening.STAGING_SUFFIX).exists()
    connection = sqlite3.connect(file)
    try:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert connection.execute("SELECT name FROM _durability_name").fetchall() == [("a",)]
    finally:
        connection.close()


async def test_leftovers_of_a_crashed_creation_are_replaced(
    tmp_path: Path, clock: VirtualClock, make_runtime: MakeRuntime
) -> None:
    """A staging file cut short and a log without its database do not reach the object."""
    async with make_runtime(path=tmp_path, bindings={"T": Tally}) as rt:
        file = _object_file(rt, "a")
        file.parent.mkdir(parents=True)
        file.with_name(file.name + _opening.STAGING_SUFFIX).write_bytes(b"SQLite form")
        donor = sqlite3.connect(tmp_path / "donor.sqlite3", isolation_level=None)
        try:
            donor.execute("PRAGMA journal_mode=WAL")
            donor.execute("PRAGMA wal_autocheckpoint=0")
            donor.execute("CREATE TABLE other (x)")
            wal = (tmp_path / "donor.sqlite3-wal").read_bytes()
        finally:
            donor.close()
        file.with_name(file.name + "-wal").write_bytes(wal)
        assert await rt.env.T.get_by_name("a").add(clock.now_ms() + 60_000) == 1
    async with make_runtime(path=tmp_path, bindings={"T": Tally}) as rt:
        assert await rt.env.T.get_by_name("a").add(clock.now_ms() + 60_000) == 2


@pytest.mark.parametrize("sqlite_syncs", [True, False])
async def test_directory_synced_by_the_runtime_only_when_sqlite_does_not(
    tmp_path: Path,
    clock: VirtualClock,
    monkeypatch: pytest.MonkeyPatch,
    sqlite_syncs: bool,
    make_runtime: MakeRuntime,
) -> None:
    """A new file's name is made durable by SQLite's directory sync at its first commit;
    the runtime syncs the directory itself only for a SQLite built without it."""
    synced: list[Path] = []
    monkeypatch.setattr(_opening, "sync_directory", synced.append)
    monkeypatch.setattr(_opening, "_sqlite_syncs_directories", lambda: sqlite_syncs)
    (tmp_path / "T").mkdir()
    async with make_runtime(path=tmp_path, bindings={"T": Tally}) as rt:
        await rt.env.T.get_by_name("a").add(clock.now_ms() + 60_000)
    assert synced == ([] if sqlite_syncs else [tmp_path / "T"])
