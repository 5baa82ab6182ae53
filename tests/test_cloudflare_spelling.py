"""The embedded runtime answers to Cloudflare's names, and `workers` resolves to it."""

from __future__ import annotations

import gc
import importlib
import importlib.util
import logging
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import pytest

from conftest import MakeRuntime
from durability.runtime import (
    AlarmInvocationInfo,
    DurableObject,
    Request,
    Response,
    Runtime,
    WorkerEntrypoint,
)
from durability.testing import VirtualClock

START = 1_700_000_000_000


class Spelled(DurableObject):
    """Uses only Cloudflare's camelCase names."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.infos: list[list[Any]] = []
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v INTEGER)")

    async def cursor(self) -> dict[str, Any]:
        sql = self.ctx.storage.sql
        written = sql.exec("INSERT INTO t VALUES ('a', 1), ('b', 2)")
        cursor = sql.exec("SELECT k, v FROM t ORDER BY k")
        rows = cursor.toArray()
        one = sql.exec("SELECT v FROM t WHERE k = 'b'").one()
        return {
            "rows": rows,
            "columns": cursor.columnNames,
            "read": cursor.rowsRead,
            "written": written.rowsWritten,
            "attribute": [row.k for row in sql.exec("SELECT k FROM t ORDER BY k")] + [one.v],
        }

    async def one_of(self, query: str) -> str:
        try:
            self.ctx.storage.sql.exec(query).one()
        except ValueError as error:
            return str(error)
        return "one row"

    async def sync_transaction(self) -> int | None:
        def fail() -> None:
            self.ctx.storage.sql.exec("INSERT INTO t VALUES ('c', 3)")
            raise KeyError("no")

        with pytest.raises(KeyError):
            self.ctx.storage.transactionSync(fail)
        result: int = self.ctx.storage.transactionSync(lambda: 42)
        found = self.ctx.storage.sql.exec("SELECT count(*) AS n FROM t WHERE k = 'c'").one()
        return result + found.n

    async def alarms(self) -> list[int | None]:
        storage = self.ctx.storage
        seen = [await storage.getAlarm()]
        await storage.setAlarm(START + 5_000)
        seen.append(await storage.getAlarm())
        await storage.deleteAlarm()
        seen.append(await storage.getAlarm())

        async def in_transaction(txn: Any) -> int | None:
            await txn.setAlarm(START + 7_000)
            return await txn.getAlarm()

        seen.append(await storage.transaction(in_transaction))
        return seen

    async def wipe(self) -> dict[str, Any]:
        await self.ctx.storage.put("k", 1)
        await self.ctx.storage.deleteAll()
        tables = self.ctx.storage.sql.exec("SELECT name FROM sqlite_master WHERE name = 't'")
        return {
            "kv": await self.ctx.storage.get("k"),
            "alarm": await self.ctx.storage.getAlarm(),
            "tables": tables.toArray(),
        }

    async def context(self) -> str:
        done: list[str] = []

        async def background() -> None:
            done.append("background")

        async def blocked() -> str:
            return "blocked"

        self.ctx.waitUntil(background())
        result: str = await self.ctx.blockConcurrencyWhile(blocked)
        return f"{result} {self.ctx.id.toString() == str(self.ctx.id)}"

    async def alarm(self, alarm_info: AlarmInvocationInfo) -> None:
        self.infos.append([alarm_info.retryCount, alarm_info.isRetry])
        if alarm_info.retryCount < 2:
            raise RuntimeError("try again")

    async def seen(self) -> list[list[Any]]:
        return self.infos


class Dropping(DurableObject):
    """Calls Cloudflare-named storage methods, awaiting their outcome or not."""

    async def dropped(self) -> list[Any]:
        storage: Any = self.ctx.storage  # as a Worker's code sees it: untyped
        storage.put("k", 1)
        storage.setAlarm(START + 1_000)
        storage.put()
        return [await storage.get("k"), await storage.getAlarm()]

    async def awaited(self) -> list[Any]:
        storage = self.ctx.storage
        await storage.put("k", 2)
        pending = storage.setAlarm(START + 2_000)
        refused = storage.put()
        seen: list[Any] = [await storage.get("k")]
        await pending
        seen.append(await storage.getAlarm())
        try:
            await refused
        except TypeError as error:
            seen.append(str(error))
        return seen


@pytest.fixture
async def rt(make_runtime: MakeRuntime) -> Any:
    async with make_runtime(bindings={"NS": Spelled}, clock=VirtualClock(START)) as runtime:
        yield runtime


async def test_cursor_camel_case_and_attribute_rows(rt: Runtime) -> None:
    """toArray, columnNames, rowsRead, rowsWritten work; row columns read as attributes."""
    result = await rt.env.NS.getByName("a").cursor()
    assert result == {
        "rows": [{"k": "a", "v": 1}, {"k": "b", "v": 2}],
        "columns": ["k", "v"],
        "read": 2,
        "written": 2,
        "attribute": ["a", "b", 2],
    }


async def test_one_refuses_other_row_counts_in_cloudflare_words(make_runtime: MakeRuntime) -> None:
    """one() raises unless exactly one row, with the message Cloudflare gives."""
    async with make_runtime(bindings={"NS": Spelled}) as runtime:
        await runtime.env.NS.getByName("a").cursor()
        probe = runtime.env.NS.getByName("a")
        assert await probe.one_of("SELECT k FROM t") == (
            "Error: Expected exactly one result from SQL query, but got multiple results."
        )
        assert await probe.one_of("SELECT k FROM t WHERE 0") == (
            "Error: Expected exactly one result from SQL query, but got no results."
        )


async def test_transaction_sync_camel_case(rt: Runtime) -> None:
    """transactionSync returns fn's value and rolls back (re-raising) on an exception."""
    assert await rt.env.NS.getByName("a").sync_transaction() == 42


async def test_alarm_methods_camel_case(rt: Runtime) -> None:
    """getAlarm/setAlarm/deleteAlarm on storage and inside a transaction."""
    seen = await rt.env.NS.getByName("a").alarms()
    assert seen == [None, START + 5_000, None, START + 7_000]


async def test_delete_all_camel_case(rt: Runtime) -> None:
    """deleteAll drops tables, keys and the alarm."""
    assert await rt.env.NS.getByName("a").wipe() == {"kv": None, "alarm": None, "tables": []}


async def test_context_camel_case(rt: Runtime) -> None:
    """ctx.waitUntil, ctx.blockConcurrencyWhile and id.toString() work."""
    assert await rt.env.NS.getByName("a").context() == "blocked True"


async def test_namespace_camel_case(rt: Runtime) -> None:
    """idFromName, newUniqueId, idFromString and getByName match the snake_case methods."""
    ns = rt.env.NS
    named = ns.idFromName("x")
    assert named == ns.id_from_name("x")
    assert named.toString() == str(named)
    assert ns.idFromString(str(named)) == named
    assert ns.newUniqueId() != ns.newUniqueId()
    assert ns.getByName("x").id == ns.get(named).id


async def test_alarm_info_camel_case(make_runtime: MakeRuntime) -> None:
    """The alarm info's retryCount/isRetry follow retries of a raising alarm()."""
    clock = VirtualClock(START)
    async with make_runtime(bindings={"NS": Spelled}, clock=clock) as runtime:
        stub = runtime.env.NS.getByName("a")
        await stub.alarms()
        await clock.advance(7_000 + 2_000 + 4_000)
        assert await stub.seen() == [[0, False], [1, True], [2, True]]
    info = AlarmInvocationInfo(3, True)
    assert (info.retryCount, info.isRetry) == (3, True)


def test_workers_resolves_to_the_runtime_classes() -> None:
    """With no real SDK installed, `from workers import ...` gives the runtime's classes."""
    assert importlib.util.find_spec("workers") is not None
    workers = importlib.import_module("workers")
    assert issubclass(workers.DurableObject, DurableObject)
    assert issubclass(workers.WorkerEntrypoint, WorkerEntrypoint)
    assert (workers.Request, workers.Response) == (Request, Response)


def test_a_real_workers_module_wins(tmp_path: Path) -> None:
    """Where another `workers` module can be imported, that one is used, not the stand-in."""
    (tmp_path / "workers.py").write_text("REAL = True\n")
    script = textwrap.dedent(
        """
        import durability.runtime
        import workers
        print(getattr(workers, "REAL", False), hasattr(workers, "WorkerEntrypoint"))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.split() == ["True", "False"]


def test_worker_entrypoint_keeps_ctx_and_env() -> None:
    """WorkerEntrypoint(ctx, env) stores self.ctx and self.env, as on Cloudflare."""
    entry = WorkerEntrypoint("ctx", {"A": 1})
    assert (entry.ctx, entry.env) == ("ctx", {"A": 1})


async def test_dropped_storage_operations_act_warn_and_log_as_under_the_runtime_sdk(
    make_runtime: MakeRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    """A storage operation never awaited still acts and gets Python's never-awaited
    warning, and a failed one asyncio's log of its error, as workerd prints them under
    workers-runtime-sdk."""
    async with make_runtime(bindings={"NS": Dropping}, clock=VirtualClock(START)) as runtime:
        with pytest.warns(RuntimeWarning, match="was never awaited") as warned:
            assert await runtime.env.NS.getByName("a").dropped() == [1, START + 1_000]
    assert len(warned) == 3
    del warned  # it holds the coroutines (each warning's source), and so the failed outcome
    gc.collect()
    logged = [r.getMessage().splitlines() for r in caplog.records if r.name == "asyncio"]
    assert [lines[0] for lines in logged] == ["Future exception was never retrieved"]
    assert "Failed to execute 'put' on 'DurableObjectStorage'" in logged[0][1]


async def test_awaited_storage_operations_neither_warn_nor_log(
    make_runtime: MakeRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    """Awaited (at once or later) storage operations give their outcome, a failure
    raised, without a warning or a log line."""
    caplog.set_level(logging.DEBUG, logger="asyncio")
    async with make_runtime(bindings={"NS": Dropping}, clock=VirtualClock(START)) as runtime:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            seen = await runtime.env.NS.getByName("a").awaited()
    assert seen == [
        2,
        START + 2_000,
        "TypeError: Failed to execute 'put' on 'DurableObjectStorage': parameter 1 is not "
        "of type 'string or object'.",
    ]
    assert [r for r in caplog.records if r.name == "asyncio" and r.levelno >= logging.WARNING] == []
