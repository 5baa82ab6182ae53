"""DurabilityLog leases: durable ranges, fencing, parallelism, ordered commits, poison."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from _log_host import LogConfig, items, partition, runtime
from conftest import START_MS, LiveObject
from durability import (
    DurabilityLog,
    LogAppendError,
    LogLease,
    LogLeaseError,
    LogLeaseOptions,
    LogRetention,
    LogTruncatedError,
)
from durability.runtime import ObjectStub
from durability.testing import VirtualClock

pytestmark = pytest.mark.usefixtures("host")


def leased(max_parallelism: int = 1, lease_ms: int = 1_000, **extra: Any) -> LogConfig:
    return LogConfig(
        leases=LogLeaseOptions(max_parallelism=max_parallelism, lease_ms=lease_ms), **extra
    )


def poisoned(max_attempts: int, *, raising: bool = False) -> LogConfig:
    config = LogConfig()

    async def on_poison(lease: LogLease[Any]) -> None:
        config.poisoned.append(lease)
        if raising:
            raise RuntimeError("handler broke")

    config.leases = LogLeaseOptions(lease_ms=1_000, max_attempts=max_attempts, on_poison=on_poison)
    return config


def offsets(lease: Any) -> list[int]:
    return [record["offset"] for record in lease["records"]]


async def test_lease_holds_a_range_and_ack_commits_it(clock: VirtualClock) -> None:
    """A lease returns records with a stored range; ack moves the cursor past it."""
    async with runtime(leased(), clock) as rt:
        p = partition(rt)
        await p.append(items(*"abc"))
        lease = await p.lease("g", 2)
        rows = await p.leases("g")
        await p.ack("g", lease["batch_id"])
        cursor = await p.cursor("g")
        after = await p.leases("g")
    assert offsets(lease) == [0, 1]
    assert (lease["first_offset"], lease["last_offset"], lease["attempt"]) == (0, 1, 1)
    assert lease["expires_at"] == START_MS + 1_000
    assert rows == [
        {
            "batch_id": lease["batch_id"],
            "consumer": "g",
            "first_offset": 0,
            "last_offset": 1,
            "state": "active",
            "attempt": 1,
            "expires_at": START_MS + 1_000,
            "created_at": START_MS,
        }
    ]
    assert cursor == 2
    assert after == []


async def test_nothing_to_lease_returns_none(clock: VirtualClock) -> None:
    """With no unleased records, lease returns None."""
    async with runtime(leased(), clock) as rt:
        p = partition(rt)
        assert await p.lease("g") is None
        await p.append(items("a"))
        lease = await p.lease("g")
        await p.ack("g", lease["batch_id"])
        assert await p.lease("g") is None


async def test_range_is_durable_across_eviction(clock: VirtualClock) -> None:
    """Eviction mid-flight releases nothing: a new instance still sees the range held."""
    async with runtime(leased(max_parallelism=2), clock) as rt:
        p = partition(rt)
        await p.append(items(*"abcd"))
        first = await p.lease("g", 2)
        await rt.evict(p)
        second = await p.lease("g", 2)
        await rt.crash(p)
        third = await p.lease("g", 2)
    assert offsets(first) == [0, 1]
    assert offsets(second) == [2, 3]
    assert third is None


async def test_max_parallelism_limits_held_ranges(clock: VirtualClock) -> None:
    """A consumer holds at most max_parallelism ranges; other consumers are independent."""
    async with runtime(leased(max_parallelism=2), clock) as rt:
        p = partition(rt)
        await p.append(items(*"abcdef"))
        a = await p.lease("g", 2)
        b = await p.lease("g", 2)
        blocked = await p.lease("g", 2)
        other = await p.lease("h", 2)
        await p.ack("g", a["batch_id"])
        c = await p.lease("g", 2)
    assert (offsets(a), offsets(b), blocked) == ([0, 1], [2, 3], None)
    assert offsets(other) == [0, 1]
    assert offsets(c) == [4, 5]


async def test_ack_commits_only_an_unbroken_run(clock: VirtualClock) -> None:
    """Acking a later range first moves nothing; the earlier ack commits both."""
    async with runtime(leased(max_parallelism=3), clock) as rt:
        p = partition(rt)
        await p.append(items(*"abcdef"))
        a = await p.lease("g", 2)
        b = await p.lease("g", 2)
        c = await p.lease("g", 2)
        await p.ack("g", b["batch_id"])
        assert await p.cursor("g") is None
        await p.ack("g", c["batch_id"])
        assert await p.cursor("g") is None
        await p.ack("g", a["batch_id"])
        assert await p.cursor("g") == 6
        assert await p.leases("g") == []


async def test_nack_redelivers_with_a_fresh_batch_id(clock: VirtualClock) -> None:
    """A nacked range is redelivered at once under a new id; the old id is fenced."""
    async with runtime(leased(), clock) as rt:
        p = partition(rt)
        await p.append(items(*"ab"))
        first = await p.lease("g")
        await p.nack("g", first["batch_id"])
        assert await p.cursor("g") is None
        again = await p.lease("g")
        with pytest.raises(LogLeaseError) as caught:
            await p.ack("g", first["batch_id"])
        await p.ack("g", again["batch_id"])
        cursor = await p.cursor("g")
    assert again["batch_id"] != first["batch_id"]
    assert (offsets(again), again["attempt"]) == ([0, 1], 2)
    assert str(caught.value) == f'Log lease "{first["batch_id"]}" is not held'
    assert cursor == 2


async def test_expiry_redelivers_and_fences_the_old_holder(clock: VirtualClock) -> None:
    """After lease_ms a range is reclaimed by the next lease call; the old ack then fails."""
    async with runtime(leased(lease_ms=1_000), clock) as rt:
        p = partition(rt)
        await p.append(items(*"ab"))
        first = await p.lease("g")
        await clock.advance(999)
        assert await p.lease("g") is None
        await clock.advance(1)
        again = await p.lease("g")
        with pytest.raises(LogLeaseError):
            await p.nack("g", first["batch_id"])
    assert (again["attempt"], again["expires_at"]) == (2, START_MS + 2_000)


async def test_expired_but_unreclaimed_lease_can_be_acked(clock: VirtualClock) -> None:
    """Expiry matters only once someone reclaims: a late ack still commits."""
    async with runtime(leased(lease_ms=1_000), clock) as rt:
        p = partition(rt)
        await p.append(items("a"))
        lease = await p.lease("g")
        await clock.advance(5_000)
        await p.ack("g", lease["batch_id"])
        assert await p.cursor("g") == 1


async def test_double_or_foreign_settlement_raises(clock: VirtualClock) -> None:
    """Settling twice, an unknown id, or another consumer's batch raises LogLeaseError."""
    async with runtime(leased(), clock) as rt:
        p = partition(rt)
        await p.append(items("a"))
        lease = await p.lease("g")
        with pytest.raises(LogLeaseError):
            await p.ack("other", lease["batch_id"])
        await p.ack("g", lease["batch_id"])
        for settle in (p.ack, p.nack):
            with pytest.raises(LogLeaseError):
                await settle("g", lease["batch_id"])
        with pytest.raises(LogLeaseError):
            await p.ack("g", "no-such-batch")


async def test_lease_validates_consumer_and_limit(clock: VirtualClock) -> None:
    """An empty consumer raises LogAppendError; a bad limit raises ValueError."""
    async with runtime(leased(), clock) as rt:
        p = partition(rt)
        with pytest.raises(LogAppendError, match="Consumer must be a non-empty string"):
            await p.lease("")
        with pytest.raises(ValueError, match="limit must be a positive integer"):
            await p.lease("g", 0)


async def test_poison_range_is_skipped_and_handed_to_on_poison(clock: VirtualClock) -> None:
    """Past max_attempts the range is skipped, on_poison gets it; the next ack commits over it."""
    config = poisoned(max_attempts=2)
    async with runtime(config, clock) as rt:
        p = partition(rt)
        await p.append(items(*"ab"))
        first = await p.lease("g", 1)
        await p.nack("g", first["batch_id"])
        second = await p.lease("g", 1)
        await p.nack("g", second["batch_id"])
        assert await p.lease("g", 1) is None
        rows = await p.leases("g")
        nxt = await p.lease("g", 1)
        await p.ack("g", nxt["batch_id"])
        cursor = await p.cursor("g")
    assert second["attempt"] == 2
    assert [row["state"] for row in rows] == ["skipped"]
    [poison] = config.poisoned
    assert (poison.attempt, poison.first_offset, poison.last_offset) == (3, 0, 0)
    assert poison.batch_id == rows[0]["batch_id"]
    assert [r.body for r in poison.records] == ["a"]
    assert offsets(nxt) == [1]
    assert cursor == 2


async def test_failing_poison_handler_is_logged_and_skip_stands(
    clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """An on_poison error is reported as durability.log.poison_handler.failed; the skip stays."""
    config = poisoned(max_attempts=1, raising=True)
    async with runtime(config, clock) as rt:
        p = partition(rt)
        await p.append(items("a"))
        first = await p.lease("g")
        await p.nack("g", first["batch_id"])
        with caplog.at_level(logging.ERROR, logger="durability"):
            assert await p.lease("g") is None
        rows = await p.leases("g")
    assert [row["state"] for row in rows] == ["skipped"]
    assert any(
        getattr(record, "event", None) == "durability.log.poison_handler.failed"
        and getattr(record, "details", None) == {"consumer": "g"}
        for record in caplog.records
    )


async def test_skip_is_durable_before_on_poison_runs(tmp_path: Path, clock: VirtualClock) -> None:
    """When on_poison runs, the skip is already committed to the object's database file."""
    seen: list[list[str]] = []
    config = LogConfig()
    files: list[Path] = []

    def on_poison(lease: LogLease[Any]) -> None:
        with sqlite3.connect(files[0]) as other:
            seen.append(
                [row[0] for row in other.execute("SELECT state FROM durability_log_leases")]
            )

    config.leases = LogLeaseOptions(lease_ms=1_000, max_attempts=1, on_poison=on_poison)
    async with runtime(config, clock, tmp_path) as rt:
        p = partition(rt)
        files.append(tmp_path / "LOGS" / f"{p.id}.sqlite3")
        await p.append(items("a"))
        first = await p.lease("g")
        await p.nack("g", first["batch_id"])
        assert await p.lease("g") is None
    assert seen == [["skipped"]]


async def test_without_on_poison_max_attempts_is_ignored(clock: VirtualClock) -> None:
    """Without on_poison, a failing range is redelivered forever."""
    config = LogConfig(leases=LogLeaseOptions(lease_ms=1_000, max_attempts=1))
    async with runtime(config, clock) as rt:
        p = partition(rt)
        await p.append(items("a"))
        for attempt in range(1, 6):
            lease = await p.lease("g")
            assert lease["attempt"] == attempt
            await p.nack("g", lease["batch_id"])


async def test_reclaimed_range_cut_by_retention_truncates_once(clock: VirtualClock) -> None:
    """A range awaiting redelivery that retention trimmed raises once, then resumes."""
    config = leased(retention=LogRetention(max_records=3))
    async with runtime(config, clock) as rt:
        p = partition(rt)
        await p.append(items(*"abcd"))
        lease = await p.lease("g", 3)
        await p.nack("g", lease["batch_id"])
        assert await p.trim() == 1
        with pytest.raises(LogTruncatedError) as caught:
            await p.lease("g", 3)
        rows = await p.leases("g")
        again = await p.lease("g", 3)
        await p.ack("g", again["batch_id"])
        cursor = await p.cursor("g")
    assert (caught.value.requested_offset, caught.value.oldest_offset) == (0, 1)
    assert [(r["first_offset"], r["last_offset"], r["state"]) for r in rows] == [(1, 2, "pending")]
    assert (offsets(again), again["attempt"]) == ([1, 2], 2)
    assert cursor == 3


async def test_fully_trimmed_range_is_skipped_and_committed_over(clock: VirtualClock) -> None:
    """A range trimmed entirely raises once, becomes skipped, and the next ack runs over it."""
    config = leased(max_parallelism=2, retention=LogRetention(max_records=2))
    async with runtime(config, clock) as rt:
        p = partition(rt)
        await p.append(items(*"abcd"))
        first = await p.lease("g", 2)
        await p.nack("g", first["batch_id"])
        assert await p.trim() == 2
        with pytest.raises(LogTruncatedError):
            await p.lease("g", 2)
        rows = await p.leases("g")
        nxt = await p.lease("g", 2)
        await p.ack("g", nxt["batch_id"])
        cursor = await p.cursor("g")
    assert [r["state"] for r in rows] == ["skipped"]
    assert offsets(nxt) == [2, 3]
    assert cursor == 4


async def test_cursor_moves_past_offsets_trimmed_before_any_lease(clock: VirtualClock) -> None:
    """A consumer's first lease starts at the oldest offset, and its ack commits past the gap."""
    config = leased(retention=LogRetention(max_records=2))
    async with runtime(config, clock) as rt:
        p = partition(rt)
        await p.append(items(*"abcde"))
        await p.trim()
        lease = await p.lease("g")
        await p.ack("g", lease["batch_id"])
        cursor = await p.cursor("g")
    assert offsets(lease) == [3, 4]
    assert cursor == 5


async def test_range_flushed_while_held_is_rehydrated(clock: VirtualClock) -> None:
    """A held range flushed to cold storage comes back from it on redelivery."""
    from test_log_retention import MemoryCold

    cold = MemoryCold()
    config = leased(retention=LogRetention(max_records=1), cold=cold)
    async with runtime(config, clock) as rt:
        p = partition(rt)
        await p.append(items(*"abc"))
        lease = await p.lease("g")
        assert await p.trim() == 2
        await p.nack("g", lease["batch_id"])
        again = await p.lease("g")
    assert [r["body"] for r in again["records"]] == ["a", "b", "c"]


async def test_leases_continue_from_a_plain_commit(clock: VirtualClock) -> None:
    """Plain commits and leases mix: a lease starts at the committed cursor."""
    async with runtime(leased(), clock) as rt:
        p = partition(rt)
        await p.append(items(*"abcd"))
        page = await p.read(0, 2)
        await p.commit("g", page["next_offset"])
        lease = await p.lease("g")
    assert offsets(lease) == [2, 3]


async def _lease_n(p: ObjectStub, consumer: str, n: int) -> list[Any]:
    return [await p.lease(consumer, 1) for _ in range(n)]


async def test_lowest_claimable_range_is_reclaimed_first(clock: VirtualClock) -> None:
    """Among ranges awaiting redelivery, the one with the lowest offset comes first."""
    async with runtime(leased(max_parallelism=3), clock) as rt:
        p = partition(rt)
        await p.append(items(*"abc"))
        a, b, c = await _lease_n(p, "g", 3)
        await p.nack("g", c["batch_id"])
        await p.nack("g", a["batch_id"])
        first = await p.lease("g", 1)
        second = await p.lease("g", 1)
    assert (offsets(first), offsets(second)) == ([0], [2])
    assert b is not None


async def test_lost_segment_of_a_held_range_truncates_until_forgotten(clock: VirtualClock) -> None:
    """A held range whose cold segment is lost raises; once forgotten it is cut and resumes."""
    from test_log_retention import MemoryCold

    cold = MemoryCold()
    config = leased(retention=LogRetention(max_records=1), cold=cold)
    async with runtime(config, clock) as rt:
        p = partition(rt)
        await p.append(items(*"abc"))
        lease = await p.lease("g")
        assert await p.trim() == 2
        await p.nack("g", lease["batch_id"])
        del cold.segments["seg-0"]
        with pytest.raises(LogTruncatedError) as lost:
            await p.lease("g")
        assert await p.forget_cold_before(2) == 1
        await clock.advance(1_000)
        with pytest.raises(LogTruncatedError) as cut:
            await p.lease("g")
        again = await p.lease("g")
        await p.ack("g", again["batch_id"])
        cursor = await p.cursor("g")
    assert (lost.value.requested_offset, lost.value.oldest_offset) == (0, 2)
    assert (cut.value.requested_offset, cut.value.oldest_offset) == (0, 2)
    assert (offsets(again), again["attempt"]) == ([2], 3)
    assert cursor == 3


async def test_log_ack_of_unknown_batch_raises_lease_error(live: LiveObject) -> None:
    """An ack of a batch that is not held raises LogLeaseError naming it."""
    log: DurabilityLog[Any] = DurabilityLog(context=live.ctx, leases=LogLeaseOptions())
    with pytest.raises(LogLeaseError) as raised:
        await log.ack("workers", "nope")
    assert raised.value.batch_id == "nope"
