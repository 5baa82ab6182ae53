"""The Cloudflare adapter, piece by piece, on both SDK flavours of the Cloudflare double."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

import _cf_ffi
from _cf_ffi import ArrayBuffer, JsException, JsPromise, jsnull
from _cloudflare_double import (
    BUILTIN,
    WORKERS_SDK,
    RawAlarmInfo,
    RawContext,
    WorkersContext,
    install,
)
from _hosts import hosted, hosting
from conftest import START_MS, Holder
from durability import (
    Durability,
    DurabilityAlarms,
    DurabilityFanout,
    DurabilityLog,
    DurabilityScheduler,
    FanoutInput,
    FanoutMessage,
    FanoutTarget,
)
from durability._cloudflare import CloudflareContext
from durability._context import alarm_info, as_context
from durability.cloudflare import adapt
from durability.runtime import AlarmInvocationInfo, Runtime
from durability.testing import VirtualClock

T0 = START_MS


@asynccontextmanager
async def live_ctx(clock: VirtualClock) -> AsyncIterator[Any]:
    """The ctx a live `Holder` object was given."""
    probe = SimpleNamespace(ctx=None, alarms=[])
    async with Runtime(bindings={"OBJ": Holder, "PROBE": probe}, clock=clock, **hosted()) as rt:
        await rt.env.OBJ.get_by_name("a").now()
        yield probe.ctx


@pytest.fixture(params=[WORKERS_SDK, BUILTIN])
def flavour(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Objects hosted as on Cloudflare, in each flavour of the double."""
    with hosting(install(monkeypatch, str(request.param))):
        yield str(request.param)


@pytest.fixture
async def ctx(flavour: str, clock: VirtualClock) -> AsyncIterator[Any]:
    """The raw Cloudflare ctx (the double) of a live object."""
    async with live_ctx(clock) as given:
        yield given


def table(cf: Any) -> Any:
    sql = adapt(cf).storage.sql
    sql.exec("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v)")
    return sql


def test_import_needs_neither_js_nor_pyodide() -> None:
    """`import durability.cloudflare` works on CPython without loading js or pyodide."""
    code = (
        "import sys, durability, durability.cloudflare; "
        "assert not {'js', 'pyodide'} & set(sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_import_draws_no_randomness() -> None:
    """Importing the library draws no random bytes: workerd refuses them at startup."""
    code = (
        "import os\n"
        "def refused(count):\n"
        "    raise OSError('randomness while the Worker starts')\n"
        "os.urandom = refused\n"
        "import durability, durability.cloudflare, durability.runtime\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


async def test_double_has_camel_case_names_only(ctx: Any) -> None:
    """The double, like Cloudflare, has no snake_case aliases the library could rely on."""
    storage = ctx.storage
    for name in ("transaction_sync", "get_alarm", "delete_all"):
        assert not hasattr(storage, name)
    assert not hasattr(ctx, "wait_until")
    assert hasattr(storage, "transactionSync") and hasattr(ctx, "waitUntil")


async def test_adapt_passes_library_contexts_through(ctx: Any) -> None:
    """`adapt` wraps a Cloudflare ctx once; library contexts come back as they are."""
    adapted = adapt(ctx)
    assert isinstance(adapted, CloudflareContext)
    assert adapt(adapted) is adapted and as_context(adapted) is adapted
    with pytest.raises(TypeError, match="ctx must be a Durable Object ctx"):
        adapt(object())


async def test_embedded_ctx_is_not_adapted(clock: VirtualClock) -> None:
    """The embedded runtime's ctx passes through `adapt` and `as_context` untouched."""
    async with live_ctx(clock) as embedded:
        assert adapt(embedded) is embedded
        assert as_context(embedded) is embedded


async def test_rows_are_plain_dicts_with_none_and_bytes(ctx: Any) -> None:
    """Rows come back as dicts: NULL is None, BLOBs bytes, whatever the SDK hands out."""
    sql = table(ctx)
    sql.exec("INSERT INTO t VALUES ('a', NULL), ('b', ?), ('c', 7)", b"\x00\x01")
    cursor = sql.exec("SELECT k, v FROM t ORDER BY k")
    assert cursor.column_names == ["k", "v"]
    assert cursor.to_list() == [
        {"k": "a", "v": None},
        {"k": "b", "v": b"\x00\x01"},
        {"k": "c", "v": 7},
    ]
    assert sql.exec("SELECT v FROM t WHERE k = 'c'").one() == {"v": 7}
    assert list(sql.exec("SELECT k FROM t WHERE k > 'a' ORDER BY k").raw()) == [("b",), ("c",)]
    assert sql.exec("DELETE FROM t WHERE k = 'a'").rows_written == 2


async def test_raw_rows_are_not_subscriptable_under_the_builtin_sdk(ctx: Any, flavour: str) -> None:
    """The double hands out what each SDK does: proxy rows with jsnull, or JsDicts."""
    table(ctx).exec("INSERT INTO t VALUES ('a', NULL)")
    row = ctx.storage.sql.exec("SELECT v FROM t").one()
    if flavour == BUILTIN:
        assert row.v is jsnull
        with pytest.raises(TypeError, match="not subscriptable"):
            row["v"]
    else:
        assert row["v"] is None and row.v is None


async def test_one_raises_unless_exactly_one_row(ctx: Any) -> None:
    """`one()` on the adapted cursor raises ValueError for zero or several rows."""
    sql = table(ctx)
    with pytest.raises(ValueError, match="got no results"):
        sql.exec("SELECT * FROM t").one()
    sql.exec("INSERT INTO t VALUES ('a', 1), ('b', 2)")
    with pytest.raises(ValueError, match="got multiple results"):
        sql.exec("SELECT * FROM t").one()


async def test_bool_is_bound_as_a_number(ctx: Any) -> None:
    """A bool is stored as the number 1, where Cloudflare would store the text 'true'."""
    sql = table(ctx)
    sql.exec("INSERT INTO t VALUES ('a', ?)", True)
    assert sql.exec("SELECT v, typeof(v) AS type FROM t").one() == {"v": 1, "type": "real"}
    ctx.storage.sql.exec("INSERT INTO t VALUES ('b', ?)", True)
    assert sql.exec("SELECT v FROM t WHERE k = 'b'").one() == {"v": "true"}


async def test_rows_written_counts_index_entries_too(ctx: Any) -> None:
    """As on Cloudflare, `rows_written` counts every index entry a write made, not rows."""
    sql = table(ctx)
    sql.exec("CREATE INDEX IF NOT EXISTS t_v ON t (v)")
    # Two rows, each with an entry in the primary key's index and in t_v.
    assert sql.exec("INSERT INTO t VALUES ('a', 1), ('b', 2)").rows_written == 6
    assert sql.exec("UPDATE t SET v = 3 WHERE k = 'a'").rows_written == 2
    assert sql.exec("UPDATE t SET k = 'c' WHERE k = 'b'").rows_written == 2
    assert sql.exec("INSERT INTO t VALUES ('a', 1) ON CONFLICT (k) DO NOTHING").rows_written == 0
    assert sql.exec("DELETE FROM t").rows_written == 6


async def test_fanout_enqueues_and_delivers_on_a_raw_ctx(ctx: Any) -> None:
    """Fanout counts inserted rows itself (rows_written is no row count on Cloudflare)."""
    delivered: list[tuple[str, str]] = []

    def consumer(name: str) -> Any:
        async def deliver(messages: list[FanoutMessage[int]]) -> None:
            delivered.extend((name, message.id) for message in messages)

        return deliver

    targets = {name: FanoutTarget(deliver=consumer(name), ack_on_return=True) for name in "abc"}
    fanout: DurabilityFanout[int] = DurabilityFanout(context=ctx, targets=targets)
    inputs = [FanoutInput(1, id="m-1"), FanoutInput(2, id="m-2")]
    first = await fanout.enqueue(inputs)
    assert first.success and first.value == ["m-1", "m-2"]
    again = await fanout.enqueue(inputs)
    assert again.success and again.value == ["m-1", "m-2"]
    clash = await fanout.enqueue(FanoutInput(3, id="m-1"))
    assert not clash.success
    await fanout.alarm()
    assert sorted(delivered) == [(name, f"m-{n}") for name in "abc" for n in (1, 2)]
    assert (await fanout.load()).outbound.pending_deliveries == 0


async def test_bytes_are_stored_as_a_blob(ctx: Any, flavour: str) -> None:
    """Bytes are a BLOB through the adapter; the built-in SDK alone stores their repr."""
    sql = table(ctx)
    sql.exec("INSERT INTO t VALUES ('a', ?)", bytearray(b"\xff"))
    assert sql.exec("SELECT typeof(v) AS type FROM t").one() == {"type": "blob"}
    ctx.storage.sql.exec("INSERT INTO t VALUES ('b', ?)", b"\xff")
    raw = sql.exec("SELECT v FROM t WHERE k = 'b'").one()["v"]
    assert raw == ("b'\\xff'" if flavour == BUILTIN else b"\xff")


async def test_integers_beyond_2_53_are_refused_before_javascript(ctx: Any) -> None:
    """An int outside +/-(2**53 - 1) is a ValueError naming the rule; nothing is stored."""
    sql = table(ctx)
    with pytest.raises(ValueError, match=r"binding 1 is an integer outside \+/-\(2\*\*53 - 1\)"):
        sql.exec("INSERT INTO t VALUES (?, ?)", "a", 2**53)
    assert sql.exec("SELECT k FROM t").to_list() == []


async def test_the_largest_safe_integers_are_bound_exactly(ctx: Any) -> None:
    """+/-(2**53 - 1), which Pyodide alone would pass as a refused BigInt, are stored."""
    sql = table(ctx)
    for value in (2**53 - 1, -(2**53 - 1)):
        with pytest.raises(JsException, match="Cannot convert a BigInt"):
            ctx.storage.sql.exec("INSERT INTO t VALUES ('raw', ?)", value)
    sql.exec("INSERT INTO t VALUES (?, ?), (?, ?)", "a", 2**53 - 1, "b", -(2**53 - 1))
    assert sql.exec("SELECT v FROM t ORDER BY k").to_list() == [
        {"v": 2**53 - 1},
        {"v": -(2**53 - 1)},
    ]


async def test_numbers_are_bound_as_real_and_read_back_as_ints(ctx: Any) -> None:
    """As on Cloudflare, a bound int is a REAL in SQL, yet an integral value reads as int."""
    sql = table(ctx)
    assert sql.exec("SELECT ? / 2 AS half, typeof(?) AS type", 5, 5).one() == {
        "half": 2.5,
        "type": "real",
    }
    sql.exec("INSERT INTO t VALUES ('a', ?)", 7)
    assert sql.exec("SELECT v FROM t").one() == {"v": 7}


async def test_numbered_parameters_take_the_bindings_by_number(ctx: Any) -> None:
    """``?1`` .. ``?N`` take the N bindings by number, as on Cloudflare, with no warning from
    Python's sqlite3 (3.12's warns when a list is bound to numbered parameters); a count
    that does not match is still Cloudflare's error."""
    sql = table(ctx)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        row = sql.exec("SELECT ?2 AS second, ?1 AS first, ?1 || ?2 AS both", "a", "b").one()
        assert row == {"second": "b", "first": "a", "both": "ab"}
        with pytest.raises(JsException, match="Wrong number of parameter bindings"):
            sql.exec("SELECT ?1 AS v", 1, 2)


async def test_bad_bindings_are_rejected_with_the_field_and_rule(ctx: Any) -> None:
    """Too many bindings is a ValueError, an unsupported type a TypeError."""
    sql = table(ctx)
    with pytest.raises(ValueError, match="at most 100 bindings"):
        sql.exec("SELECT 1", *range(101))
    with pytest.raises(TypeError, match="binding 0 must be None, bool, int"):
        sql.exec("SELECT ?", object())


async def test_sql_errors_propagate_as_cloudflare_raises_them(ctx: Any) -> None:
    """SQL errors and refused statements are not translated: Cloudflare's error comes out."""
    sql = table(ctx)
    with pytest.raises(JsException, match=r"please use the state\.storage\.transaction"):
        sql.exec("BEGIN")
    sql.exec("INSERT INTO t VALUES ('a', 1)")
    with pytest.raises(JsException, match="SQLITE_CONSTRAINT"):
        sql.exec("INSERT INTO t VALUES ('a', 2)")


async def test_alarm_reads_none_when_unset_and_takes_datetimes(ctx: Any) -> None:
    """`get_alarm` is None (not jsnull) when unset; `set_alarm` takes ms or a datetime."""
    storage = adapt(ctx).storage
    assert await storage.get_alarm() is None
    await storage.set_alarm(datetime.fromtimestamp((T0 + 5_000) / 1000, UTC))
    assert await storage.get_alarm() == T0 + 5_000
    await storage.set_alarm(T0 + 9_000)
    assert await storage.get_alarm() == T0 + 9_000
    await storage.delete_alarm()
    assert await storage.get_alarm() is None


async def test_transaction_reraises_the_original_exception_and_rolls_back(ctx: Any) -> None:
    """An exception inside `transaction` comes out as itself (the double wraps it)."""
    sql = table(ctx)
    storage = adapt(ctx).storage

    async def failing(txn: Any) -> None:
        sql.exec("INSERT INTO t VALUES ('a', 1)")
        await txn.set_alarm(T0 + 1_000)
        raise KeyError("no")

    with pytest.raises(KeyError, match="no"):
        await storage.transaction(failing)
    assert sql.exec("SELECT * FROM t").to_list() == []
    assert await storage.get_alarm() is None

    async def raw_failing(txn: Any) -> None:
        raise KeyError("no")

    with pytest.raises(JsException, match=r"(?s)PythonError: Traceback.*KeyError: 'no'"):
        await ctx.storage.transaction(_cf_ffi.create_proxy(raw_failing))


async def test_transaction_returns_the_callbacks_own_value(ctx: Any) -> None:
    """`transaction`'s result is the very object the callback returned; the txn is adapted."""
    value = {"n": [1, 2]}

    async def body(txn: Any) -> dict[str, Any]:
        assert await txn.get_alarm() is None
        await txn.put("k", {"a": 1})
        return value

    assert await adapt(ctx).storage.transaction(body) is value
    assert await adapt(ctx).storage.get("k") == {"a": 1}


async def test_transaction_sync_and_block_concurrency_while_box_exceptions(ctx: Any) -> None:
    """`transaction_sync` and `block_concurrency_while` re-raise the callback's exception."""
    adapted = adapt(ctx)
    sql = table(ctx)

    def write() -> None:
        sql.exec("INSERT INTO t VALUES ('a', 1)")
        raise ValueError("sync boom")

    with pytest.raises(ValueError, match="sync boom"):
        adapted.storage.transaction_sync(write)
    assert sql.exec("SELECT * FROM t").to_list() == []
    assert adapted.storage.transaction_sync(lambda: 42) == 42

    async def blocked() -> None:
        raise LookupError("blocked boom")

    with pytest.raises(LookupError, match="blocked boom"):
        await adapted.block_concurrency_while(blocked)

    async def fine() -> str:
        return "ok"

    assert await adapted.block_concurrency_while(fine) == "ok"


async def test_plain_functions_are_accepted_where_callbacks_are_awaited(ctx: Any) -> None:
    """`block_concurrency_while` and `transaction` take plain functions too, as on the
    embedded runtime: their result is awaited only when it is awaitable."""
    adapted = adapt(ctx)
    sql = table(ctx)
    assert await adapted.block_concurrency_while(lambda: 3) == 3  # type: ignore[arg-type,return-value]

    def write(txn: Any) -> int:
        sql.exec("INSERT INTO t VALUES ('plain', 1)")
        return 5

    assert await adapted.storage.transaction(write) == 5  # type: ignore[arg-type]
    assert sql.exec("SELECT k FROM t").to_list() == [{"k": "plain"}]


async def test_callbacks_reach_javascript_as_proxies_destroyed_afterwards(
    ctx: Any, flavour: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """JavaScript gets a `create_proxy` callback (a borrowed one would be dead by then,
    and the wrapping SDK would make one never destroyed), destroyed once the call is over."""
    made: list[_cf_ffi.PyProxy] = []

    def create_proxy(fn: Any) -> _cf_ffi.PyProxy:
        made.append(_cf_ffi.PyProxy(fn))
        return made[-1]

    monkeypatch.setattr(sys.modules["pyodide.ffi"], "create_proxy", create_proxy)

    async def body(txn: Any) -> int:
        return 7

    assert await adapt(ctx).storage.transaction(body) == 7
    assert len(made) == 1 and made[0].destroyed

    async def bare(txn: Any) -> int:
        return 7

    if flavour == BUILTIN:
        with pytest.raises(JsException, match="borrowed proxy was automatically destroyed"):
            await ctx.storage.transaction(bare)
    else:
        assert await ctx.storage.transaction(bare) == 7
        assert len(made) == 1


async def test_wait_until_hands_cloudflare_a_promise_settled_by_the_task(ctx: Any) -> None:
    """`wait_until` gives `waitUntil` a JS promise that settles when the Python task ends."""
    given: list[Any] = []
    ctx.waitUntil = given.append
    release = asyncio.Event()

    async def work() -> None:
        await release.wait()

    CloudflareContext(ctx).wait_until(work())
    [promise] = given
    assert isinstance(promise, JsPromise) and not promise.settled
    release.set()
    await promise
    assert promise.settled


async def test_raw_wait_until_refuses_a_coroutine_and_complains_about_a_task(ctx: Any) -> None:
    """The double, like Cloudflare, never runs a bare coroutine and cannot keep a task."""

    async def work() -> None:
        return None

    with pytest.raises(TypeError, match="bare coroutine"):
        ctx.waitUntil(work())
    task = asyncio.ensure_future(work())
    ctx.waitUntil(task)
    await task
    assert ctx.complaints == ["This borrowed proxy was automatically destroyed"]


async def test_adapted_wait_until_runs_the_work_without_complaints(ctx: Any) -> None:
    """Work given to the adapted `wait_until` runs; Cloudflare gets no Python task."""
    done = asyncio.Event()

    async def work() -> None:
        done.set()

    adapt(ctx).wait_until(work())
    await asyncio.wait_for(done.wait(), 1)
    assert ctx.complaints == []
    with pytest.raises(TypeError, match="wait_until needs a coroutine or future"):
        adapt(ctx).wait_until(42)  # type: ignore[arg-type]


async def test_id_has_the_hex_string_and_the_name(ctx: Any) -> None:
    """`str(ctx.id)` is the 64-hex id and `id.name` the name, through the adapter."""
    object_id = adapt(ctx).id
    assert str(object_id) == ctx.id.toString() and len(str(object_id)) == 64
    assert object_id.name == "a"


async def test_kv_values_are_plain_json(ctx: Any) -> None:
    """KV values go in and come out as plain JSON values, lists sorted by key."""
    storage = adapt(ctx).storage
    await storage.put("b", {"x": [1, None]})
    await storage.put("a", "text")
    assert await storage.get("b") == {"x": [1, None]}
    assert await storage.get("missing") is None
    assert await storage.list() == {"a": "text", "b": {"x": [1, None]}}
    assert await storage.list(prefix="b") == {"b": {"x": [1, None]}}
    assert await storage.delete("a") is True
    await storage.set_alarm(T0 + 1_000)
    await storage.delete_all()
    assert await storage.list() == {}
    assert await storage.get_alarm() is None


def test_alarm_info_is_converted() -> None:
    """Cloudflare's `retryCount`/`isRetry` info gets the library's names (both kept)."""
    info = alarm_info(RawAlarmInfo(2, True))
    assert (info.retry_count, info.is_retry, info.retryCount, info.isRetry) == (2, True, 2, True)
    library = AlarmInvocationInfo(retry_count=1, is_retry=True)
    assert alarm_info(library) is library
    assert alarm_info(None) is None


def test_jsnull_alarm_info_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """A `jsnull` alarm info reads as no info."""
    install(monkeypatch, BUILTIN)
    assert alarm_info(jsnull) is None


async def test_helpers_and_scheduler_adapt_a_raw_ctx(ctx: Any) -> None:
    """Every helper, the scheduler and the migrate classmethods take the raw ctx."""
    scheduler = DurabilityScheduler(context=ctx)
    assert isinstance(scheduler._engine.context, CloudflareContext)
    Durability(scheduler=scheduler, handlers={"x": print})
    DurabilityAlarms(context=ctx, handlers={"y": print})
    DurabilityLog(context=ctx)
    assert Durability.migrate(ctx, target=None).rolled_back
    assert Durability.migrate(ctx).applied


def test_array_buffer_cells_become_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A BLOB the SDK left as an ArrayBuffer proxy is read as bytes."""
    from durability._cloudflare._ffi import row_of

    install(monkeypatch, BUILTIN)
    assert row_of([ArrayBuffer(b"\x01"), jsnull, memoryview(b"\x02"), 1.5], jsnull) == (
        b"\x01",
        None,
        b"\x02",
        1.5,
    )


async def test_adapt_works_without_pyodide_on_plain_python_values(
    monkeypatch: pytest.MonkeyPatch, clock: VirtualClock
) -> None:
    """Where neither js nor pyodide exist, a ctx answering in Python values is adapted:
    callbacks are passed as they are and `waitUntil` gets the task."""
    for name in ("js", "pyodide", "pyodide.ffi"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    async with live_ctx(clock) as embedded:
        double = WorkersContext(RawContext(embedded))
        given: list[Any] = []
        double._ctx.waitUntil = given.append  # type: ignore[method-assign,assignment]
        adapted = adapt(double)
        sql = adapted.storage.sql
        sql.exec("CREATE TABLE t (k TEXT, v)")
        assert (
            adapted.storage.transaction_sync(
                lambda: sql.exec("INSERT INTO t VALUES ('a', ?)", b"\x01").rows_written
            )
            == 1
        )
        assert sql.exec("SELECT * FROM t").one() == {"k": "a", "v": b"\x01"}

        async def work() -> None:
            return None

        adapted.wait_until(work())
        [task] = given
        assert isinstance(task, asyncio.Task)
        await task


async def test_alarm_retry_hook_reads_cloudflare_retry_info(ctx: Any) -> None:
    """A failed pass driven by Cloudflare's alarm info reports its retry count and id."""
    seen: list[Any] = []
    scheduler = DurabilityScheduler(context=ctx, on_alarm_retry=seen.append)
    Durability(scheduler=scheduler, handlers={"x": print})
    adapt(ctx).storage.sql.exec("DROP TABLE durability_calls")
    await scheduler.alarm(RawAlarmInfo(3, True))  # type: ignore[arg-type]
    [retry] = seen
    assert (retry.retry_count, retry.is_retry, retry.object_id) == (3, True, ctx.id.toString())


async def test_delete_all_through_the_library_lets_live_helpers_go_on(ctx: Any) -> None:
    """`adapt(ctx).storage.delete_all()` reaches the helpers given the raw ctx: their
    tables are back at once and the deleted work is gone."""
    ran: list[str] = []
    durability = Durability(context=ctx, handlers={"x": lambda call: ran.append(call.id)})
    assert adapt(ctx) is adapt(ctx) is as_context(ctx)
    await durability.x("old", delay_ms=60_000)
    await adapt(ctx).storage.delete_all()
    await durability.x("new")
    await durability.alarm()
    assert ran == ["new"]
    assert (await durability.x.get_result("new")).status == "completed"
    assert await adapt(ctx).storage.get_alarm() is None


async def test_a_pass_after_cloudflares_own_delete_all_recreates_instead_of_failing(
    ctx: Any,
) -> None:
    """A raw `deleteAll()` the library never saw: the next pass finds the tables gone,
    recreates them and arms no retry alarm; registrations work again."""
    retries: list[Any] = []
    scheduler = DurabilityScheduler(context=ctx, on_alarm_retry=retries.append)
    ran: list[str] = []
    durability = Durability(scheduler=scheduler, handlers={"x": lambda call: ran.append(call.id)})
    await durability.x("old", delay_ms=60_000)
    await ctx.storage.deleteAll()
    await ctx.storage.deleteAlarm()
    await scheduler.alarm()
    assert retries == [] and await adapt(ctx).storage.get_alarm() is None
    await durability.x("new")
    await scheduler.alarm()
    assert ran == ["new"]
