"""DurabilityLog: append, read, bounds, cursors, load, options and schema."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from _log_host import LogConfig, items, partition, runtime
from conftest import START_MS, LiveObject, MakeRuntime
from durability import (
    MAX_LOG_BYTES,
    DurabilityLog,
    DurabilityScheduler,
    LoadSnapshot,
    LogAppendError,
    LogAppendInput,
    LogLeaseOptions,
    LogRetention,
    LogTruncatedError,
    SerializedError,
)
from durability.cloudflare import adapt
from durability.runtime import DurableObject
from durability.testing import VirtualClock

pytestmark = pytest.mark.usefixtures("host")


async def test_append_returns_dense_offsets_in_input_order(clock: VirtualClock) -> None:
    """A batch gets consecutive offsets from 0, one per input, in input order."""
    async with runtime(LogConfig(), clock) as rt:
        p = partition(rt)
        first = await p.append(items("a", "b", "c"))
        second = await p.append_one({"n": 1})
        page = await p.read(0)
    assert first["success"] is True
    assert first["value"] == [0, 1, 2]
    assert first["error"] is None
    assert second["value"] == [3]
    assert [r["body"] for r in page["records"]] == ["a", "b", "c", {"n": 1}]
    assert all(r["appended_at"] == START_MS for r in page["records"])


async def test_existing_key_reuses_its_offset(clock: VirtualClock) -> None:
    """Re-appending a hot key returns its original offset and consumes none."""
    async with runtime(LogConfig(), clock) as rt:
        p = partition(rt)
        await p.append([["a", "k1"], ["b", "k2"]])
        again = await p.append([["changed", "k2"], ["c", "k3"], ["again", "k1"]])
        page = await p.read(0)
        bounds = await p.bounds()
    assert again["value"] == [1, 2, 0]
    assert bounds["next_offset"] == 3
    assert [(r["deduplication_key"], r["body"]) for r in page["records"]] == [
        ("k1", "a"),
        ("k2", "b"),
        ("k3", "c"),
    ]


async def test_duplicates_in_one_batch_share_one_offset(clock: VirtualClock) -> None:
    """Inside a batch a key takes the position of its first use and the body of its last."""
    async with runtime(LogConfig(), clock) as rt:
        p = partition(rt)
        result = await p.append([["x1", "x"], ["y", None], ["x2", "x"], ["z", "z"]])
        page = await p.read(0)
    assert result["value"] == [0, 1, 0, 2]
    assert [r["body"] for r in page["records"]] == ["x2", "y", "z"]


async def test_all_duplicates_consume_no_offset(clock: VirtualClock) -> None:
    """A batch of only known keys writes nothing new."""
    async with runtime(LogConfig(), clock) as rt:
        p = partition(rt)
        await p.append([["a", "k"]])
        result = await p.append([["a", "k"], ["b", "k"]])
        bounds = await p.bounds()
    assert result["value"] == [0, 0]
    assert bounds["next_offset"] == 1


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        ([], "Append requires at least one record"),
        ([["x", None]] * 4, "Append of 4 records exceeds maxBatchSize 3"),
        ([["x", "k"], ["y", ""]], "Append deduplication keys must be non-empty"),
    ],
)
async def test_definite_rejections_return_failure_and_write_nothing(
    clock: VirtualClock, batch: list[Any], message: str
) -> None:
    """Empty, oversized and empty-key batches come back as success=False and store nothing."""
    async with runtime(LogConfig(max_batch_size=3), clock) as rt:
        p = partition(rt)
        result = await p.append(batch)
        bounds = await p.bounds()
    assert result["success"] is False
    assert result["value"] is None
    assert result["error"] == {"name": "LogAppendError", "message": message}
    assert result["load"]["window_ms"] == 60_000
    assert bounds["next_offset"] == 0


async def test_log_definite_rejections_come_back_as_enqueue_results(live: LiveObject) -> None:
    """Empty, oversize and empty-key appends return success=False with a LogAppendError."""
    log: DurabilityLog[Any] = DurabilityLog(context=live.ctx, max_batch_size=2)
    cases = [
        ([], "Append requires at least one record"),
        ([LogAppendInput(1), LogAppendInput(2), LogAppendInput(3)], "exceeds maxBatchSize 2"),
        ([LogAppendInput(1, deduplication_key="")], "must be non-empty"),
    ]
    for records, message in cases:
        result = await log.append(records)
        assert (result.success, result.value) == (False, None)
        assert isinstance(result.error, SerializedError)
        assert result.error.name == "LogAppendError"
        assert message in result.error.message
        assert isinstance(result.load, LoadSnapshot)
    assert (await log.bounds()).next_offset == 0
    accepted = await log.append([LogAppendInput("a"), LogAppendInput("b")])
    assert (accepted.success, accepted.value, accepted.error) == (True, [0, 1], None)


class Direct(DurableObject):
    """An object that calls its log with values a stub cannot carry."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.log: DurabilityLog[Any] = DurabilityLog(context=ctx)

    async def append_value(self, kind: str) -> Any:
        values: dict[str, Any] = {
            "set": [LogAppendInput("ok"), LogAppendInput({1, 2})],
            "dict": [{"body": "x"}],
            "key": [LogAppendInput("x", 5)],  # type: ignore[arg-type]
            "scalar": "x",
            "nan": LogAppendInput(float("nan")),
        }
        await self.log.append(values[kind])

    async def next_offset(self) -> int:
        return (await self.log.bounds()).next_offset

    async def break_storage(self) -> None:
        adapt(self.ctx).storage.sql.exec("DROP TABLE durability_log_records")

    async def append_ok(self) -> Any:
        return (await self.log.append(LogAppendInput("x"))).success


@pytest.mark.parametrize("kind", ["set", "dict", "key", "scalar", "nan"])
async def test_non_json_body_or_wrong_input_type_raises(
    clock: VirtualClock, kind: str, make_runtime: MakeRuntime
) -> None:
    """A non-JSON body or an input that is not LogAppendInput raises TypeError, storing nothing."""
    async with make_runtime(bindings={"D": Direct}) as rt:
        stub = rt.namespace("D").get_by_name("d")
        with pytest.raises(TypeError):
            await stub.append_value(kind)
        assert await stub.next_offset() == 0


async def test_storage_failure_raises_not_failure_result(
    clock: VirtualClock, make_runtime: MakeRuntime
) -> None:
    """A storage error is raised to the caller, never reported as success=False."""
    async with make_runtime(bindings={"D": Direct}) as rt:
        stub = rt.namespace("D").get_by_name("d")
        await stub.break_storage()
        with pytest.raises(Exception, match="durability_log_records"):
            await stub.append_ok()


async def test_append_load_counts_the_append_in_flight(clock: VirtualClock) -> None:
    """The load returned by append counts that append as in flight, earlier ones as done."""
    async with runtime(LogConfig(), clock) as rt:
        p = partition(rt)
        first = await p.append(items("a"))
        second = await p.append(items("b"))
    assert first["load"]["inbound"] == {
        "in_flight": 1,
        "completed": 0,
        "average_processing_ms": None,
    }
    assert second["load"]["inbound"]["in_flight"] == 1
    assert second["load"]["inbound"]["completed"] == 1


async def test_read_pages_limits_and_lag(clock: VirtualClock) -> None:
    """A page holds at most min(limit, max_batch_size) records; lag counts what is left."""
    async with runtime(LogConfig(max_batch_size=4), clock) as rt:
        p = partition(rt)
        await p.append(items(*"abcd"))
        await p.append(items(*"ef"))
        page = await p.read(1, 2)
        capped = await p.read(0, 50)
        default = await p.read(2)
        tail = await p.read(6)
        beyond = await p.read(10)
    assert [r["offset"] for r in page["records"]] == [1, 2]
    assert (page["next_offset"], page["lag"]) == (3, 3)
    assert [r["offset"] for r in capped["records"]] == [0, 1, 2, 3]
    assert [r["offset"] for r in default["records"]] == [2, 3, 4, 5]
    assert (default["next_offset"], default["lag"]) == (6, 0)
    assert tail == {"records": [], "next_offset": 6, "lag": 0}
    assert beyond == {"records": [], "next_offset": 10, "lag": 0}


async def test_read_validates_offset_and_limit(clock: VirtualClock) -> None:
    """Bad offsets raise LogAppendError; a bad limit raises ValueError or TypeError."""
    async with runtime(LogConfig(), clock) as rt:
        p = partition(rt)
        with pytest.raises(LogAppendError, match="Read offset must be a non-negative integer"):
            await p.read(-1)
        with pytest.raises(LogAppendError, match="Read offset"):
            await p.read(1.5)
        with pytest.raises(ValueError, match="limit must be a positive integer"):
            await p.read(0, 0)
        with pytest.raises(TypeError, match="limit"):
            await p.read(0, 2.5)


async def test_read_below_oldest_raises_truncated(clock: VirtualClock) -> None:
    """Reading a trimmed offset raises LogTruncatedError with both offsets."""
    config = LogConfig(retention=LogRetention(max_records=2))
    async with runtime(config, clock) as rt:
        p = partition(rt)
        await p.append(items(*"abcde"))
        assert await p.trim() == 3
        with pytest.raises(LogTruncatedError) as caught:
            await p.read(1)
        page = await p.read(3)
    assert (caught.value.requested_offset, caught.value.oldest_offset) == (1, 3)
    assert str(caught.value) == "Log offset 1 was trimmed; the oldest retained offset is 3"
    assert [r["body"] for r in page["records"]] == ["d", "e"]


async def test_log_read_below_oldest_raises_truncated(live: LiveObject) -> None:
    """Reading a trimmed offset raises LogTruncatedError with both offsets."""
    log: DurabilityLog[Any] = DurabilityLog(context=live.ctx, retention=LogRetention(max_records=1))
    await log.append([LogAppendInput(n) for n in range(3)])
    assert await log.trim() == 2
    with pytest.raises(LogTruncatedError) as raised:
        await log.read(0)
    assert (raised.value.requested_offset, raised.value.oldest_offset) == (0, 2)
    page = await log.read(2)
    assert [r.body for r in page.records] == [2]
    assert (page.next_offset, page.lag) == (3, 0)


async def test_bounds_of_empty_and_filled_log(clock: VirtualClock) -> None:
    """An empty log has all bounds at 0; appends move next_offset only."""
    async with runtime(LogConfig(), clock) as rt:
        p = partition(rt)
        empty = await p.bounds()
        await p.append(items(1, 2, 3))
        filled = await p.bounds()
    assert empty == {"oldest_offset": 0, "hot_offset": 0, "next_offset": 0}
    assert filled == {"oldest_offset": 0, "hot_offset": 0, "next_offset": 3}


async def test_commit_only_advances(clock: VirtualClock) -> None:
    """A cursor is None until committed, then moves only forward."""
    async with runtime(LogConfig(), clock) as rt:
        p = partition(rt)
        assert await p.cursor("search") is None
        await p.commit("search", 5)
        await p.commit("search", 3)
        await p.commit("search", 5)
        assert await p.cursor("search") == 5
        await p.commit("search", 9)
        assert await p.cursor("search") == 9


async def test_cursors_are_independent_and_sorted(clock: VirtualClock) -> None:
    """cursors() returns every consumer's cursor ordered by name."""
    async with runtime(LogConfig(), clock) as rt:
        p = partition(rt)
        await p.commit("zeta", 1)
        await p.commit("alpha", 7)
        await p.commit("mid", 0)
        cursors = await p.cursors()
    assert list(cursors.items()) == [("alpha", 7), ("mid", 0), ("zeta", 1)]


async def test_commit_validates_offset_before_writing(clock: VirtualClock) -> None:
    """A negative or non-integer commit offset raises LogAppendError and stores nothing."""
    async with runtime(LogConfig(), clock) as rt:
        p = partition(rt)
        for bad in (-1, 2.0, True, "3"):
            with pytest.raises(LogAppendError, match="Commit offset must be a non-negative"):
                await p.commit("c", bad)
        assert await p.cursors() == {}


async def test_every_consumer_method_rejects_an_empty_or_non_string_name(
    clock: VirtualClock,
) -> None:
    """Every consumer-taking method rejects "" and non-strings alike, storing nothing."""
    async with runtime(LogConfig(leases=LogLeaseOptions()), clock) as rt:
        p = partition(rt)
        await p.append(items("a"))
        for bad in ("", 5, None):
            for call in (
                p.cursor(bad),
                p.commit(bad, 1),
                p.lease(bad),
                p.ack(bad, "batch"),
                p.nack(bad, "batch"),
                p.leases(bad),
            ):
                with pytest.raises(LogAppendError, match="Consumer must be a non-empty string"):
                    await call
        assert await p.cursors() == {}
        assert (await p.lease("c"))["first_offset"] == 0


async def test_load_backlog_follows_the_furthest_behind_cursor(clock: VirtualClock) -> None:
    """Backlog is next_offset minus the lowest cursor, and 0 without cursors."""
    async with runtime(LogConfig(), clock) as rt:
        p = partition(rt)
        await p.append(items(*"abcdefghij"))
        assert (await p.load())["outbound"]["pending_deliveries"] == 0
        await p.commit("fast", 9)
        await p.commit("slow", 4)
        load = await p.load()
    assert load["outbound"]["pending_deliveries"] == 6
    assert load["observed_at"] == START_MS


async def test_records_and_cursors_survive_restart(tmp_path: Path, clock: VirtualClock) -> None:
    """A file-backed log finds its records, offsets and cursors after a restart."""
    async with runtime(LogConfig(), clock, tmp_path) as rt:
        p = partition(rt)
        await p.append([["a", "k"], ["b", None]])
        await p.commit("c", 1)
    async with runtime(LogConfig(), clock, tmp_path) as rt:
        p = partition(rt)
        again = await p.append([["a", "k"], ["c", None]])
        page = await p.read(0)
        cursors = await p.cursors()
    assert again["value"] == [0, 2]
    assert [r["body"] for r in page["records"]] == ["a", "b", "c"]
    assert cursors == {"c": 1}


async def test_eviction_loses_nothing(clock: VirtualClock) -> None:
    """After eviction a new instance continues the same log."""
    async with runtime(LogConfig(), clock) as rt:
        p = partition(rt)
        await p.append(items("a"))
        await rt.evict(p)
        result = await p.append(items("b"))
    assert result["value"] == [1]


async def test_lease_tables_only_with_leases(clock: VirtualClock) -> None:
    """The log migration always runs; the lease migration only with leases."""
    async with runtime(LogConfig(), clock) as rt:
        plain = await partition(rt).tables()
    async with runtime(LogConfig(leases=LogLeaseOptions()), clock) as rt:
        leased = await partition(rt).tables()
    assert plain == [
        "durability_log_cursors",
        "durability_log_records",
        "durability_log_segments",
        "durability_log_seq",
    ]
    assert leased == sorted([*plain, "durability_log_allocations", "durability_log_leases"])


async def test_lease_methods_require_the_option(clock: VirtualClock) -> None:
    """Without leases, lease/ack/nack/leases raise TypeError."""
    async with runtime(LogConfig(), clock) as rt:
        p = partition(rt)
        for call in (p.lease("c"), p.ack("c", "b"), p.nack("c", "b"), p.leases("c")):
            with pytest.raises(TypeError, match="Leases require the leases option"):
                await call


class Builder(DurableObject):
    """Builds logs with the options it is given and reports how construction failed."""

    async def build(self, case: str) -> list[str]:
        cases: dict[str, dict[str, Any]] = {
            "batch_zero": {"max_batch_size": 0},
            "batch_float": {"max_batch_size": 1.5},
            "retention_dict": {"retention": {"max_records": 1}},
            "cold_partial": {"cold": object()},
            "leases_dict": {"leases": {"lease_ms": 1}},
            "routing_wrong": {"routing": object()},
        }
        options = cases[case]
        try:
            DurabilityLog(context=self.ctx, **options)
        except Exception as error:
            return [type(error).__name__, str(error)]
        return []

    async def migrate(self, target: Any) -> list[Any]:
        result = DurabilityLog.migrate(self.ctx, target)
        return [list(result.applied), list(result.rolled_back)]

    async def build_default(self) -> None:
        DurabilityLog(context=self.ctx)

    async def two_on_one_scheduler(self) -> str:
        scheduler = DurabilityScheduler(context=self.ctx)
        DurabilityLog(scheduler=scheduler)
        try:
            DurabilityLog(scheduler=scheduler)
        except ValueError as error:
            return str(error)
        return ""


@pytest.mark.parametrize(
    ("case", "error", "fragment"),
    [
        ("batch_zero", "ValueError", "max_batch_size must be a positive integer"),
        ("batch_float", "NotAnIntegerError", "max_batch_size must be a positive integer"),
        ("retention_dict", "TypeError", "retention must be a LogRetention"),
        ("cold_partial", "TypeError", "cold must have write"),
        ("leases_dict", "TypeError", "leases must be a LogLeaseOptions"),
        ("routing_wrong", "TypeError", "routing must be a RoutingLoad"),
    ],
)
async def test_constructor_rejects_bad_options(
    clock: VirtualClock, case: str, error: str, fragment: str, make_runtime: MakeRuntime
) -> None:
    """Each bad option raises at construction with a message naming it."""
    async with make_runtime(bindings={"B": Builder}) as rt:
        failure = await rt.namespace("B").get_by_name("b").build(case)
    assert failure[0] == error
    assert fragment in failure[1]


INVALID_OPTIONS: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"max_batch_size": 0}, ValueError, "max_batch_size must be a positive integer"),
    ({"retention": {"max_records": 1}}, TypeError, "retention"),
    ({"leases": {}}, TypeError, "leases"),
    ({"cold": object()}, TypeError, "cold"),
    ({"routing": object()}, TypeError, "routing"),
]


@pytest.mark.parametrize(
    ("options", "error", "message"),
    INVALID_OPTIONS,
    ids=[sorted(options)[-1] for options, _, _ in INVALID_OPTIONS],
)
async def test_invalid_option_raises_and_writes_nothing(
    live: LiveObject, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    """A bad option raises at construction with a message naming it, and writes nothing."""
    with pytest.raises(error, match=re.escape(message)):
        DurabilityLog(context=live.ctx, **options)
    assert live.tables() == []


async def test_one_log_per_scheduler(clock: VirtualClock, make_runtime: MakeRuntime) -> None:
    """A second log on the same scheduler is rejected."""
    async with make_runtime(bindings={"B": Builder}) as rt:
        message = await rt.namespace("B").get_by_name("b").two_on_one_scheduler()
    assert "already attached" in message


async def test_migrate_down_and_up(clock: VirtualClock, make_runtime: MakeRuntime) -> None:
    """DurabilityLog.migrate moves only the log schema, down to nothing and back."""
    async with make_runtime(bindings={"B": Builder}) as rt:
        b = rt.namespace("B").get_by_name("b")
        await b.build_default()
        down = await b.migrate(None)
        up = await b.migrate("durability_0006_create_log")
    assert down == [[], ["durability_0006_create_log"]]
    assert up == [["durability_0006_create_log"], []]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_age_ms": 0}, "retention.max_age_ms must be a positive integer"),
        ({"max_records": -1}, "retention.max_records must be a positive integer"),
        ({"max_records": 0}, "retention.max_records must be a positive integer"),
        ({"max_bytes": 0}, "retention.max_bytes must be a positive integer"),
        ({"max_bytes": MAX_LOG_BYTES + 1}, "retention.max_bytes must not exceed 1073741824 bytes"),
    ],
)
def test_retention_validates_at_construction(kwargs: dict[str, int], message: str) -> None:
    """LogRetention fields must be positive integers; max_bytes at most 1 GiB."""
    with pytest.raises(ValueError, match=message):
        LogRetention(**kwargs)
    assert LogRetention(max_bytes=MAX_LOG_BYTES).max_bytes == MAX_LOG_BYTES


def test_max_log_bytes_is_one_gib() -> None:
    """`MAX_LOG_BYTES` is 1 GiB and is the largest allowed `max_bytes`."""
    assert MAX_LOG_BYTES == 1 << 30
    assert LogRetention(max_bytes=MAX_LOG_BYTES).max_bytes == MAX_LOG_BYTES


@pytest.mark.parametrize(
    ("kwargs", "message", "error"),
    [
        ({"max_parallelism": 0}, "leases.max_parallelism must be a positive integer", ValueError),
        ({"lease_ms": 0}, "leases.lease_ms must be a positive integer", ValueError),
        ({"max_attempts": 0}, "leases.max_attempts must be a positive integer", ValueError),
        ({"lease_ms": 1.5}, "leases.lease_ms", TypeError),
        ({"on_poison": "no"}, "leases.on_poison must be callable", TypeError),
    ],
)
def test_lease_options_validate_at_construction(
    kwargs: dict[str, Any], message: str, error: type[Exception]
) -> None:
    """LogLeaseOptions rejects bad values (ValueError) and wrong types (TypeError)."""
    with pytest.raises(error, match=message):
        LogLeaseOptions(**kwargs)
    defaults = LogLeaseOptions()
    assert (defaults.max_parallelism, defaults.lease_ms, defaults.max_attempts) == (1, 30_000, None)


@pytest.mark.parametrize(
    "body", ["aaa", None, 0, -1.5, True, [1, "é", None], {"a": {"b": [1.25, "日本"]}}, ""]
)
def test_append_stores_the_standard_envelope(body: Any) -> None:
    """The stored payload is the compact upstream envelope, and it reads back unchanged."""
    from durability._serialization import deserialize, serialize

    expected = json.dumps(
        {"kind": "value", "value": body}, separators=(",", ":"), ensure_ascii=False
    )
    assert serialize(body) == expected
    assert deserialize(serialize(body)) == body


def test_random_keys_are_version_4_uuids() -> None:
    """Keys drawn for records without one are distinct version-4 UUID strings."""
    import uuid

    from durability._uuid import random_uuid

    keys = {random_uuid() for _ in range(1_000)}
    assert len(keys) == 1_000
    for key in keys:
        parsed = uuid.UUID(key)
        assert (str(parsed), parsed.version, parsed.variant) == (key, 4, uuid.RFC_4122)
