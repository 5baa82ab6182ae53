"""An object file's connection keeps SQLite's temporary data (statement and savepoint
journals, scratch tables) in memory: a large write inside a savepoint opens no
temporary file, where SQLite's default would spill its journal to one."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from conftest import MakeRuntime
from durability.runtime import DurableObject

FDS = Path("/proc/self/fd")

pytestmark = pytest.mark.skipif(not FDS.is_dir(), reason="needs /proc/self/fd (Linux)")


def _temporary_files() -> list[str]:
    """Open files of this process that are SQLite temporary files (unlinked at once,
    so only their descriptors show them)."""
    found = []
    for fd in os.listdir(FDS):
        try:
            target = os.readlink(FDS / fd)
        except OSError:
            continue
        if "etilqs_" in target:
            found.append(target)
    return found


CREATE = (
    "CREATE TABLE IF NOT EXISTS items (id TEXT PRIMARY KEY, v TEXT)",
    "CREATE INDEX IF NOT EXISTS items_v ON items (v)",
)
FIRST = "INSERT INTO items (id, v) VALUES ('first', 'x')"
MANY = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
    "INSERT INTO items (id, v) SELECT 'item-' || i, hex(randomblob(32)) FROM n"
)
REWRITE = "UPDATE items SET v = hex(randomblob(32)) WHERE id != 'first'"
ROWS = 3_000


class Filler(DurableObject):
    """Writes many indexed rows in one savepoint, then reports temporary files."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        for statement in CREATE:
            ctx.storage.sql.exec(statement)

    async def fill(self) -> list[str]:
        sql = self.ctx.storage.sql
        sql.exec(FIRST)

        def many() -> list[str]:
            sql.exec(MANY, ROWS)
            sql.exec(REWRITE)
            return _temporary_files()

        return self.ctx.storage.transaction_sync(many)

    async def count(self) -> int:
        return int(self.ctx.storage.sql.exec("SELECT COUNT(*) AS n FROM items").one()["n"])


def test_sqlite_by_default_spills_this_write_to_a_temporary_file(tmp_path: Path) -> None:
    """The premise: the same write on a plain connection does open one."""
    connection = sqlite3.connect(tmp_path / "plain.sqlite3", isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        for statement in CREATE:
            connection.execute(statement)
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(FIRST)
        connection.execute("SAVEPOINT many")
        connection.execute(MANY, (ROWS,))
        connection.execute(REWRITE)
        assert _temporary_files() != []
        connection.execute("RELEASE many")
        connection.execute("COMMIT")
    finally:
        connection.close()


async def test_a_large_write_in_a_savepoint_opens_no_temporary_file(
    tmp_path: Path, make_runtime: MakeRuntime
) -> None:
    async with make_runtime(path=tmp_path, bindings={"FILL": Filler}) as rt:
        filler = rt.env.FILL.get_by_name("big")
        assert await filler.fill() == []
        assert await filler.count() == ROWS + 1
