"""ctx.storage: the SQL cursor, refused statements and values, transactions, KV."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from conftest import START_MS, LiveObject, MakeRuntime
from durability.runtime import DurableObject
from durability.runtime._js_errors import JsException

Probe = Callable[[Any], Awaitable[Any]]


class Lab(DurableObject):
    """Runs the probe function the test put in `env.PROBES` under the given name."""

    async def probe(self, name: str) -> Any:
        return await self.env.PROBES[name](self.ctx.storage)


async def run_probes(make_runtime: MakeRuntime, **probes: Probe) -> dict[str, Any]:
    async with make_runtime(bindings={"LAB": Lab, "PROBES": probes}) as rt:
        stub = rt.env.LAB.get_by_name("lab")
        return {name: await stub.probe(name) for name in probes}


async def test_cursor_api(make_runtime: MakeRuntime) -> None:
    """Rows iterate as dicts; to_list, one, raw, column names and counters work."""

    async def probe(storage: Any) -> Any:
        sql = storage.sql
        sql.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, label TEXT, blob BLOB)")
        inserted = sql.exec(
            "INSERT INTO t (label, blob) VALUES (?, ?), (?, ?)", "a", b"\x00", "b", None
        )
        rows = sql.exec("SELECT id, label FROM t ORDER BY id")
        names = rows.column_names
        as_list = rows.to_list()
        one = sql.exec("SELECT label FROM t WHERE id = ?", 2).one()
        raw = list(sql.exec("SELECT id, label FROM t ORDER BY id").raw())
        blob = sql.exec("SELECT blob FROM t WHERE id = 1").one()["blob"]
        with pytest.raises(ValueError, match="exactly one"):
            sql.exec("SELECT * FROM t").one()
        with pytest.raises(ValueError, match="no results"):
            sql.exec("SELECT * FROM t WHERE id = 9").one()
        return {
            "written": inserted.rows_written,
            "names": names,
            "list": as_list,
            "read": rows.rows_read,
            "one": one,
            "raw": [list(r) for r in raw],
            "blob_ok": blob == b"\x00",
        }

    result = (await run_probes(make_runtime, p=probe))["p"]
    assert result == {
        "written": 2,
        "names": ["id", "label"],
        "list": [{"id": 1, "label": "a"}, {"id": 2, "label": "b"}],
        "read": 2,
        "one": {"label": "b"},
        "raw": [[1, "a"], [2, "b"]],
        "blob_ok": True,
    }


async def test_cursor_is_consumed_once_by_rows_and_raw(make_runtime: MakeRuntime) -> None:
    """Rows, raw tuples and one() read from one position: what one takes, the others skip."""

    async def probe(storage: Any) -> Any:
        sql = storage.sql
        sql.exec("CREATE TABLE t (n INTEGER PRIMARY KEY)")
        sql.exec("INSERT INTO t (n) VALUES (1), (2), (3), (4)")
        cursor = sql.exec("SELECT n FROM t ORDER BY n")
        first = next(cursor)
        raw = cursor.raw()
        second = next(raw)
        third = next(cursor)
        last = cursor.one()
        return {
            "first": first,
            "second": list(second),
            "third": third,
            "last": last,
            "rest": list(cursor) + [list(row) for row in raw] + list(cursor.raw()),
            "read": cursor.rows_read,
        }

    result = (await run_probes(make_runtime, p=probe))["p"]
    assert result == {
        "first": {"n": 1},
        "second": [2],
        "third": {"n": 3},
        "last": {"n": 4},
        "rest": [],
        "read": 4,
    }


async def test_cancelled_sync_leaves_the_commit_to_the_others(make_runtime: MakeRuntime) -> None:
    """Cancelling one `sync()` waiter cancels neither the commit nor another waiter on it."""

    async def probe(storage: Any) -> Any:
        storage.sql.exec("CREATE TABLE t (n INTEGER PRIMARY KEY)")
        await storage.sync()

        async def write_then_sync(n: int) -> None:
            storage.sql.exec("INSERT INTO t (n) VALUES (?)", n)
            await storage.sync()

        first = asyncio.ensure_future(write_then_sync(1))
        second = asyncio.ensure_future(write_then_sync(2))
        await asyncio.sleep(0)
        first.cancel()
        await second
        with pytest.raises(asyncio.CancelledError):
            await first
        await storage.sync()
        return [row["n"] for row in storage.sql.exec("SELECT n FROM t ORDER BY n")]

    assert (await run_probes(make_runtime, p=probe))["p"] == [1, 2]


async def test_transaction_statements_are_refused(make_runtime: MakeRuntime) -> None:
    """BEGIN, COMMIT, ROLLBACK, SAVEPOINT, RELEASE and END raise Cloudflare's error (also
    a ValueError)."""

    async def probe(storage: Any) -> Any:
        refused = []
        for statement in (
            "BEGIN",
            "  begin immediate",
            "COMMIT",
            "END",
            "ROLLBACK",
            "SAVEPOINT x",
            "RELEASE x",
            "/* c */ -- d\n BEGIN",
            "SELECT 1; BEGIN",
        ):
            with pytest.raises(JsException, match=r"^Error: To execute a transaction") as raised:
                storage.sql.exec(statement)
            assert isinstance(raised.value, ValueError)
            refused.append(statement)
        return len(refused)

    assert (await run_probes(make_runtime, p=probe))["p"] == 9


async def test_binding_rules(make_runtime: MakeRuntime) -> None:
    """Ints beyond 2**53-1 raise Cloudflare's TypeError, bools are 0/1, odd types are
    refused.

    The Workers limits hold too, with Cloudflare's errors: at most 100 bound parameters
    and 100 columns, 100,000-byte statements, 50-byte LIKE patterns.
    """

    async def probe(storage: Any) -> Any:
        sql = storage.sql
        sql.exec("CREATE TABLE v (x)")
        for big in (2**53, -(2**53), 2**63):
            with pytest.raises(TypeError, match=r"^TypeError: Cannot convert a BigInt value"):
                sql.exec("INSERT INTO v VALUES (?)", big)
        for odd in ([1], {"a": 1}, object()):
            with pytest.raises(TypeError, match="binding 0"):
                sql.exec("INSERT INTO v VALUES (?)", odd)
        with pytest.raises(TypeError, match="cannot be sent over RPC"):
            sql.exec("INSERT INTO v VALUES (?)", bytearray(b"x"))
        limits = {
            "too many SQL variables at offset 307: SQLITE_ERROR": (
                "SELECT " + ", ".join("?" * 101),
                *range(101),
            ),
            "statement too long: SQLITE_TOOBIG": ("SELECT '" + "x" * 100_000 + "'",),
            "too many columns on w: SQLITE_ERROR": (
                "CREATE TABLE w (" + ", ".join(f"c{i}" for i in range(101)) + ")",
            ),
            "LIKE or GLOB pattern too complex: SQLITE_ERROR": ("SELECT 'a' LIKE ?", "%" * 51),
        }
        for message, (query, *bindings) in limits.items():
            with pytest.raises(JsException, match=f"^Error: {message}$"):
                sql.exec(query, *bindings)
        assert len(next(sql.exec("SELECT " + ", ".join("?" * 100), *range(100)).raw())) == 100
        sql.exec("INSERT INTO v VALUES (?), (?), (?)", True, False, 2**53 - 1)
        return [row["x"] for row in sql.exec("SELECT x FROM v ORDER BY rowid")]

    assert (await run_probes(make_runtime, p=probe))["p"] == [1, 0, 2**53 - 1]


async def test_multiple_statements_return_the_last(make_runtime: MakeRuntime) -> None:
    """Several statements in one exec all run; the cursor holds the last one's rows."""

    async def probe(storage: Any) -> Any:
        cursor = storage.sql.exec(
            "CREATE TABLE m (x TEXT); INSERT INTO m VALUES ('a;b'); SELECT x FROM m;"
        )
        with pytest.raises(JsException, match="only the last statement can have parameters"):
            storage.sql.exec("SELECT ?; SELECT ?", 1, 2)
        last = storage.sql.exec("SELECT 1 AS a; SELECT ? AS b", 5).to_list()
        with pytest.raises(ValueError, match=r"^Error: SQL code did not contain a statement"):
            storage.sql.exec("  -- nothing\n")
        return [cursor.to_list(), last]

    assert (await run_probes(make_runtime, p=probe))["p"] == [[{"x": "a;b"}], [{"b": 5}]]


async def test_transaction_sync_rolls_back_and_nests(make_runtime: MakeRuntime) -> None:
    """transaction_sync undoes its writes on an exception (which propagates) and nests."""

    async def probe(storage: Any) -> Any:
        sql = storage.sql
        sql.exec("CREATE TABLE t (x INTEGER)")

        def inner() -> None:
            sql.exec("INSERT INTO t VALUES (2)")
            raise KeyError("inner")

        def outer() -> int:
            sql.exec("INSERT INTO t VALUES (1)")
            with pytest.raises(KeyError):
                storage.transaction_sync(inner)
            return 10

        assert storage.transaction_sync(outer) == 10

        def failing() -> None:
            sql.exec("INSERT INTO t VALUES (3)")
            raise LookupError("outer")

        with pytest.raises(LookupError, match="outer"):
            storage.transaction_sync(failing)
        with pytest.raises(TypeError):
            storage.transaction_sync(42)
        return [row["x"] for row in sql.exec("SELECT x FROM t")]

    assert (await run_probes(make_runtime, p=probe))["p"] == [1]


async def test_async_transaction(make_runtime: MakeRuntime) -> None:
    """transaction() commits txn writes, rolls back on error and refuses real suspension."""

    async def probe(storage: Any) -> Any:
        async def good(txn: Any) -> str:
            await txn.put("a", 1)
            await txn.set_alarm(5_000_000_000_000)
            return str(await txn.get("a"))

        async def bad(txn: Any) -> None:
            await txn.put("b", 2)
            await txn.delete_alarm()
            raise ValueError("nope")

        async def suspends(txn: Any) -> None:
            import asyncio

            await txn.put("c", 3)
            await asyncio.sleep(0)

        assert await storage.transaction(good) == "1"
        with pytest.raises(ValueError, match="nope"):
            await storage.transaction(bad)
        with pytest.raises(RuntimeError, match="rolled back"):
            await storage.transaction(suspends)
        return [await storage.list(), await storage.get_alarm()]

    assert (await run_probes(make_runtime, p=probe))["p"] == [{"a": 1}, 5_000_000_000_000]


async def test_kv_api(make_runtime: MakeRuntime) -> None:
    """get/put/delete/list with prefix and limit; bad values are refused, other keys are
    made strings (as on Cloudflare)."""

    async def probe(storage: Any) -> Any:
        assert await storage.get("missing") is None
        for key, value in [("b/2", [1, {"x": None}]), ("a", "v"), ("b/1", 1.5), ("c", True)]:
            await storage.put(key, value)
        await storage.put("a", {"replaced": 1})
        with pytest.raises(TypeError, match="tuple"):
            await storage.put("bad", (1, 2))
        with pytest.raises(JsException, match=r"^DataCloneError"):
            await storage.put("bad", object())
        await storage.put(3, "x")
        assert [await storage.get("3"), await storage.delete(3)] == ["x", True]
        with pytest.raises(ValueError):
            await storage.list(limit=0)
        deleted = [await storage.delete("c"), await storage.delete("c")]
        return {
            "all": await storage.list(),
            "prefix": await storage.list(prefix="b/"),
            "limit": await storage.list(limit=2),
            "both": await storage.list(prefix="b/", limit=1),
            "get": await storage.get("b/2"),
            "deleted": deleted,
            "bad_absent": await storage.get("bad"),
        }

    result = (await run_probes(make_runtime, p=probe))["p"]
    assert list(result["all"]) == ["a", "b/1", "b/2"]
    assert result["all"]["a"] == {"replaced": 1}
    assert result["prefix"] == {"b/1": 1.5, "b/2": [1, {"x": None}]}
    assert list(result["limit"]) == ["a", "b/1"]
    assert result["both"] == {"b/1": 1.5}
    assert result["get"] == [1, {"x": None}]
    assert result["deleted"] == [True, False]
    assert result["bad_absent"] is None


async def test_delete_all_leaves_the_object_as_new(make_runtime: MakeRuntime) -> None:
    """delete_all drops every table, key and the alarm, and the storage stays usable."""

    async def fill(storage: Any) -> Any:
        storage.sql.exec("CREATE TABLE t (x)")
        storage.sql.exec("CREATE VIEW w AS SELECT x FROM t")
        await storage.put("k", 1)
        await storage.set_alarm(5_000_000_000_000)
        await storage.delete_all()
        tables = storage.sql.exec(
            "SELECT name FROM sqlite_master WHERE name NOT LIKE '\\_durability%' ESCAPE '\\'"
        ).to_list()
        await storage.put("after", 2)
        return [tables, await storage.list(), await storage.get_alarm()]

    assert (await run_probes(make_runtime, p=fill))["p"] == [[], {"after": 2}, None]


async def test_alarm_api(make_runtime: MakeRuntime) -> None:
    """get/set/delete alarm: one alarm, replaced by set, datetimes accepted, bad input refused."""
    from datetime import UTC, datetime

    async def probe(storage: Any) -> Any:
        seen = [await storage.get_alarm()]
        await storage.set_alarm(5_000_000_000_000)
        await storage.set_alarm(datetime(2200, 1, 1, tzinfo=UTC))
        seen.append(await storage.get_alarm())
        with pytest.raises(ValueError, match="aware"):
            await storage.set_alarm(datetime(2200, 1, 1))
        with pytest.raises(TypeError):
            await storage.set_alarm("soon")
        with pytest.raises(ValueError):
            await storage.set_alarm(-1)
        seen.append(await storage.get_alarm())
        await storage.delete_alarm()
        await storage.delete_alarm()
        seen.append(await storage.get_alarm())
        return seen

    expected = round(datetime(2200, 1, 1, tzinfo=UTC).timestamp() * 1000)
    assert (await run_probes(make_runtime, p=probe))["p"] == [None, expected, expected, None]


async def test_kv_list_prefix_edges(make_runtime: MakeRuntime) -> None:
    """Prefix listing is exact for any code points, including the highest one."""
    top = chr(0x10FFFF)

    async def probe(storage: Any) -> Any:
        keys = ["a", "a/", "a/x", "a0", f"a{top}", f"a{top}z", "b", "\ud7ff", "\ue000"]
        for key in keys:
            await storage.put(key, key)
        return {
            prefix: list(await storage.list(prefix=prefix))
            for prefix in ("a/", f"a{top}", "a", "\ud7ff", "")
        }

    result = (await run_probes(make_runtime, p=probe))["p"]
    assert result["a/"] == ["a/", "a/x"]
    assert result[f"a{top}"] == [f"a{top}", f"a{top}z"]
    assert result["a"] == ["a", "a/", "a/x", "a0", f"a{top}", f"a{top}z"]
    assert result["\ud7ff"] == ["\ud7ff"]
    assert len(result[""]) == 9


async def test_sql_cursor_surface(live: LiveObject) -> None:
    """`sql.exec` returns a cursor with rows as dicts, raw tuples, names and counters."""
    sql = live.ctx.storage.sql
    sql.exec("CREATE TABLE t (k TEXT, v INTEGER)")
    assert sql.exec("INSERT INTO t VALUES (?, ?), (?, ?)", "a", 1, "b", 2).rows_written == 2
    cursor = sql.exec("SELECT k, v FROM t ORDER BY k")
    assert cursor.column_names == ["k", "v"]
    assert list(cursor) == [{"k": "a", "v": 1}, {"k": "b", "v": 2}]
    assert cursor.rows_read == 2
    assert sql.exec("SELECT k, v FROM t ORDER BY k").to_list()[1] == {"k": "b", "v": 2}
    assert list(sql.exec("SELECT k, v FROM t ORDER BY k").raw()) == [("a", 1), ("b", 2)]
    assert sql.exec("SELECT v FROM t WHERE k = ?", "b").one() == {"v": 2}
    with pytest.raises(ValueError):
        sql.exec("SELECT v FROM t").one()
    for statement in ("BEGIN", "COMMIT", "SAVEPOINT s"):
        with pytest.raises(ValueError):
            sql.exec(statement)


async def test_transactions_roll_back_on_exception(live: LiveObject) -> None:
    """`transaction_sync` and `transaction` are atomic and re-raise the error."""
    storage = live.ctx.storage
    storage.sql.exec("CREATE TABLE t (v INTEGER)")

    def sync_body() -> None:
        storage.sql.exec("INSERT INTO t VALUES (1)")
        raise LookupError("undo")

    async def async_body(txn: Any) -> None:
        await txn.put("k", 1)
        await txn.set_alarm(START_MS + 1000)
        raise LookupError("undo")

    async def committed(txn: Any) -> int | None:
        await txn.put("k", 2)
        await txn.set_alarm(START_MS + 2000)
        alarm: int | None = await txn.get_alarm()
        return alarm

    with pytest.raises(LookupError):
        storage.transaction_sync(sync_body)
    with pytest.raises(LookupError):
        await storage.transaction(async_body)
    assert storage.sql.exec("SELECT count(*) AS n FROM t").one() == {"n": 0}
    assert (await storage.get("k"), await storage.get_alarm()) == (None, None)
    assert storage.transaction_sync(lambda: 7) == 7
    assert await storage.transaction(committed) == START_MS + 2000
    assert await storage.get("k") == 2


async def test_kv_methods_and_delete_all(live: LiveObject) -> None:
    """KV get/put/delete/list behave as documented; delete_all leaves the object as new."""
    storage = live.ctx.storage
    for key, value in (("a:1", 1), ("a:2", [2]), ("b", {"c": None})):
        await storage.put(key, value)
    assert await storage.get("a:2") == [2]
    assert await storage.list() == {"a:1": 1, "a:2": [2], "b": {"c": None}}
    assert await storage.list(prefix="a:", limit=1) == {"a:1": 1}
    assert (await storage.delete("b"), await storage.delete("b")) == (True, False)
    storage.sql.exec("CREATE TABLE t (v INTEGER)")
    await storage.set_alarm(START_MS + 60_000)
    await storage.delete_all()
    assert await storage.list() == {}
    assert await storage.get_alarm() is None
    assert storage.sql.exec("SELECT name FROM sqlite_master WHERE name = 't'").to_list() == []
