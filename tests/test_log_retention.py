"""DurabilityLog retention: trim by age, count and bytes; cold segments; truncation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from _log_host import LogConfig, items, partition, runtime
from durability import LogRecord, LogRetention, LogSegment, LogTruncatedError
from durability._log.retention import retention_prefix
from durability.cold import FileColdStorage, current_log_id
from durability.testing import VirtualClock

pytestmark = pytest.mark.usefixtures("host")


class MemoryCold:
    """A cold store in memory that can fail writes and lose segments on demand."""

    def __init__(self) -> None:
        self.segments: dict[str, list[LogRecord[Any]]] = {}
        self.writes: list[tuple[int, int]] = []
        self.fail_writes = False
        self.locator = ""

    async def write(self, segment: LogSegment[Any]) -> str:
        if self.fail_writes:
            raise OSError("cold store unavailable")
        self.writes.append((segment.first_offset, segment.last_offset))
        locator = self.locator or f"seg-{segment.first_offset}"
        self.segments[locator] = list(segment.records)
        return locator

    async def read(self, locator: str) -> list[LogRecord[Any]] | None:
        return self.segments.get(locator)


async def test_without_retention_trim_removes_nothing(clock: VirtualClock) -> None:
    """Without retention the log grows and trim() returns 0."""
    async with runtime(LogConfig(), clock) as rt:
        p = partition(rt)
        await p.append(items(*"abc"))
        assert await p.trim() == 0
        assert (await p.bounds())["hot_offset"] == 0


async def test_trim_by_record_count_keeps_the_newest(clock: VirtualClock) -> None:
    """max_records trims the oldest records beyond the count."""
    async with runtime(LogConfig(retention=LogRetention(max_records=2)), clock) as rt:
        p = partition(rt)
        await p.append(items(*"abcde"))
        assert await p.trim() == 3
        assert await p.trim() == 0
        bounds = await p.bounds()
    assert bounds == {"oldest_offset": 3, "hot_offset": 3, "next_offset": 5}


async def test_trim_by_age_removes_only_strictly_older(clock: VirtualClock) -> None:
    """max_age_ms removes records appended strictly before now - max_age_ms."""
    async with runtime(LogConfig(retention=LogRetention(max_age_ms=1_000)), clock) as rt:
        p = partition(rt)
        await p.append(items("old"))
        await clock.advance(500)
        await p.append(items("newer"))
        await clock.advance(500)
        assert await p.trim() == 0
        await clock.advance(1)
        assert await p.trim() == 1
        await clock.advance(499)
        assert await p.trim() == 0
        await clock.advance(1)
        assert await p.trim() == 1


async def test_bytes_count_the_stored_envelope(clock: VirtualClock) -> None:
    """Bytes are the UTF-8 size of the JSON envelope: "aaa" counts 30, "aaaa" 31."""
    async with runtime(LogConfig(retention=LogRetention(max_bytes=90)), clock) as rt:
        p = partition(rt)
        await p.append(items("aaa", "aaa", "aaa", "aaa"))
        assert await p.trim() == 1
    async with runtime(LogConfig(retention=LogRetention(max_bytes=89)), clock) as rt:
        p = partition(rt)
        await p.append(items("aaa", "aaa", "aaa", "aaa"))
        assert await p.trim() == 2
    async with runtime(LogConfig(retention=LogRetention(max_bytes=60)), clock) as rt:
        p = partition(rt)
        await p.append(items("aaaa", "aaa", "aaa"))
        assert await p.trim() == 1
        assert (await p.bounds())["hot_offset"] == 1


async def test_small_byte_budget_flushes_everything(clock: VirtualClock) -> None:
    """A byte budget of 12 with four "aaa" records flushes all four."""
    cold = MemoryCold()
    config = LogConfig(retention=LogRetention(max_bytes=12), cold=cold)
    async with runtime(config, clock) as rt:
        p = partition(rt)
        await p.append(items("aaa", "aaa", "aaa", "aaa"))
        assert await p.trim() == 4
        bounds = await p.bounds()
    assert cold.writes == [(0, 3)]
    assert bounds == {"oldest_offset": 0, "hot_offset": 4, "next_offset": 4}


async def test_trim_loops_over_passes_of_max_batch_size(clock: VirtualClock) -> None:
    """Each pass handles at most max_batch_size records; trim() loops until done."""
    cold = MemoryCold()
    config = LogConfig(max_batch_size=3, retention=LogRetention(max_records=1), cold=cold)
    async with runtime(config, clock) as rt:
        p = partition(rt)
        await p.append(items(*"abc"))
        await p.append(items(*"def"))
        await p.append(items(*"gh"))
        assert await p.trim() == 7
    assert cold.writes == [(0, 2), (3, 5), (6, 6)]


async def test_next_offset_never_decreases_after_trimming_everything(clock: VirtualClock) -> None:
    """Trimming every record keeps next_offset, and the next append continues from it."""
    async with runtime(LogConfig(retention=LogRetention(max_age_ms=1)), clock) as rt:
        p = partition(rt)
        await p.append(items(*"abc"))
        await clock.advance(10)
        assert await p.trim() == 3
        assert await p.bounds() == {"oldest_offset": 3, "hot_offset": 3, "next_offset": 3}
        assert (await p.append(items("d")))["value"] == [3]


async def test_deduplication_ends_when_the_record_leaves(clock: VirtualClock) -> None:
    """Re-appending a key after its record was trimmed creates a new record."""
    async with runtime(LogConfig(retention=LogRetention(max_records=1)), clock) as rt:
        p = partition(rt)
        await p.append([["a", "k"], ["b", "j"]])
        await p.trim()
        again = await p.append([["a2", "k"], ["b2", "j"]])
    assert again["value"] == [2, 1]


async def test_cold_pages_stay_readable_and_never_span_segments(clock: VirtualClock) -> None:
    """Flushed records read back from cold storage, one segment per page, then hot ones."""
    cold = MemoryCold()
    config = LogConfig(max_batch_size=3, retention=LogRetention(max_records=2), cold=cold)
    async with runtime(config, clock) as rt:
        p = partition(rt)
        await p.append(items(*"abc"))
        await p.append(items(*"def"))
        await p.trim()
        first = await p.read(0, 10)
        middle = await p.read(1)
        second = await p.read(3)
        hot = await p.read(4)
    assert cold.writes == [(0, 2), (3, 3)]
    assert [r["body"] for r in first["records"]] == ["a", "b", "c"]
    assert (first["next_offset"], first["lag"]) == (3, 3)
    assert [r["offset"] for r in middle["records"]] == [1, 2]
    assert [r["body"] for r in second["records"]] == ["d"]
    assert [r["body"] for r in hot["records"]] == ["e", "f"]


class PlainCold:
    """A cold store of plain functions, noting the log id each write was made for."""

    def __init__(self) -> None:
        self.segments: dict[str, list[LogRecord[Any]]] = {}
        self.log_ids: list[str] = []

    def write(self, segment: LogSegment[Any]) -> str:
        self.log_ids.append(current_log_id())
        locator = f"plain-{segment.first_offset}"
        self.segments[locator] = list(segment.records)
        return locator

    def read(self, locator: str) -> list[LogRecord[Any]] | None:
        return self.segments.get(locator)


async def test_a_cold_store_of_plain_functions_works(clock: VirtualClock) -> None:
    """`write` and `read` may be plain functions; `current_log_id()` answers in both."""
    cold = PlainCold()
    config = LogConfig(retention=LogRetention(max_records=1), cold=cold)  # type: ignore[arg-type]
    async with runtime(config, clock) as rt:
        p = partition(rt)
        await p.append(items(*"abc"))
        assert await p.trim() == 2
        page = await p.read(0)
    assert [r["body"] for r in page["records"]] == ["a", "b"]
    assert len(cold.log_ids) == 1 and cold.log_ids[0].count(".") == 1


async def test_failed_cold_write_keeps_records_hot(clock: VirtualClock) -> None:
    """A failing cold write raises and leaves every record hot and unindexed."""
    cold = MemoryCold()
    cold.fail_writes = True
    config = LogConfig(retention=LogRetention(max_records=1), cold=cold)
    async with runtime(config, clock) as rt:
        p = partition(rt)
        await p.append(items(*"abc"))
        with pytest.raises(OSError, match="cold store unavailable"):
            await p.trim()
        assert await p.bounds() == {"oldest_offset": 0, "hot_offset": 0, "next_offset": 3}
        cold.fail_writes = False
        assert await p.trim() == 2


async def test_empty_locator_is_rejected_before_deleting(clock: VirtualClock) -> None:
    """A cold store returning an empty locator raises TypeError; records stay hot."""
    cold = MemoryCold()
    cold.locator = ""
    cold.write = _empty_locator  # type: ignore[method-assign]
    config = LogConfig(retention=LogRetention(max_records=1), cold=cold)
    async with runtime(config, clock) as rt:
        p = partition(rt)
        await p.append(items(*"ab"))
        with pytest.raises(TypeError, match="Cold storage must return a non-empty locator"):
            await p.trim()
        assert (await p.bounds())["hot_offset"] == 0


async def _empty_locator(segment: LogSegment[Any]) -> str:
    return ""


async def test_lost_segment_surfaces_as_truncation(clock: VirtualClock) -> None:
    """A segment the cold store no longer has raises LogTruncatedError, never a gap."""
    cold = MemoryCold()
    config = LogConfig(max_batch_size=2, retention=LogRetention(max_records=1), cold=cold)
    async with runtime(config, clock) as rt:
        p = partition(rt)
        await p.append(items(*"ab"))
        await p.append(items(*"cd"))
        await p.append(items("e"))
        await p.trim()
        del cold.segments["seg-0"]
        with pytest.raises(LogTruncatedError) as caught:
            await p.read(1)
        later = await p.read(2)
    assert (caught.value.requested_offset, caught.value.oldest_offset) == (1, 4)
    assert [r["offset"] for r in later["records"]] == [2, 3]


async def test_trim_without_cold_storage_deletes_records(clock: VirtualClock) -> None:
    """Records trimmed without cold storage are gone: reads below hot truncate."""
    async with runtime(LogConfig(retention=LogRetention(max_records=1)), clock) as rt:
        p = partition(rt)
        await p.append(items(*"abc"))
        await p.trim()
        with pytest.raises(LogTruncatedError) as caught:
            await p.read(0)
    assert caught.value.oldest_offset == 2


async def test_forget_cold_before_drops_old_segments(clock: VirtualClock) -> None:
    """forget_cold_before removes index entries ending below the offset; reads then truncate."""
    cold = MemoryCold()
    config = LogConfig(max_batch_size=2, retention=LogRetention(max_records=1), cold=cold)
    async with runtime(config, clock) as rt:
        p = partition(rt)
        await p.append(items(*"ab"))
        await p.append(items(*"cd"))
        await p.append(items("e"))
        await p.trim()
        assert await p.forget_cold_before(2) == 1
        assert await p.forget_cold_before(2) == 0
        assert (await p.bounds())["oldest_offset"] == 2
        with pytest.raises(LogTruncatedError) as caught:
            await p.read(1)
        assert [r["body"] for r in (await p.read(2))["records"]] == ["c", "d"]
        with pytest.raises(Exception, match="Offset must be a non-negative integer"):
            await p.forget_cold_before(-1)
    assert (caught.value.requested_offset, caught.value.oldest_offset) == (1, 2)


async def test_file_cold_store_survives_restart(tmp_path: Path, clock: VirtualClock) -> None:
    """With FileColdStorage, flushed segments are readable by a new runtime on the same path."""
    config = LogConfig(
        retention=LogRetention(max_records=1), cold=FileColdStorage(tmp_path / "cold")
    )
    async with runtime(config, clock, tmp_path / "db") as rt:
        p = partition(rt)
        await p.append([["a", "ka"], ["b", "kb"], ["c", "kc"]])
        assert await p.trim() == 2
    async with runtime(config, clock, tmp_path / "db") as rt:
        p = partition(rt)
        page = await p.read(0)
        bounds = await p.bounds()
    assert [(r["offset"], r["deduplication_key"], r["body"]) for r in page["records"]] == [
        (0, "ka", "a"),
        (1, "kb", "b"),
    ]
    assert bounds == {"oldest_offset": 0, "hot_offset": 2, "next_offset": 3}
    files = sorted((tmp_path / "cold").iterdir())
    assert [f.name[-25:] for f in files] == ["00000000000000000000.json"]
    assert json.loads(files[0].read_text())["lastOffset"] == 1


class _IndexNeverStored(FileColdStorage):
    """Writes the segment, then fails as a crash before the index update would."""

    async def write(self, segment: LogSegment[Any]) -> str:
        await super().write(segment)
        raise OSError("crashed after the cold write")


async def test_orphaned_segment_is_reused_not_overwritten(
    tmp_path: Path, clock: VirtualClock
) -> None:
    """A segment written by a flush that never committed is kept when the flush repeats."""
    failing = LogConfig(
        retention=LogRetention(max_records=1), cold=_IndexNeverStored(tmp_path / "cold")
    )
    async with runtime(failing, clock, tmp_path / "db") as rt:
        await partition(rt).append([["a", "ka"], ["b", "kb"], ["c", "kc"]])
        with pytest.raises(OSError, match="crashed"):
            await partition(rt).trim()
    orphan = list((tmp_path / "cold").iterdir())
    config = LogConfig(
        retention=LogRetention(max_records=1), cold=FileColdStorage(tmp_path / "cold")
    )
    async with runtime(config, clock, tmp_path / "db") as rt:
        p = partition(rt)
        assert await p.trim() == 2
        page = await p.read(0)
    assert [r["body"] for r in page["records"]] == ["a", "b"]
    assert list((tmp_path / "cold").iterdir()) == orphan


def _prefix(
    oldest: list[tuple[int, int]],
    retention: LogRetention,
    *,
    hot_count: int | None = None,
    total_bytes: int | None = None,
    now: int = 10_000,
) -> int:
    return retention_prefix(
        oldest,
        retention=retention,
        hot_count=len(oldest) if hot_count is None else hot_count,
        total_bytes=sum(size for size, _ in oldest) if total_bytes is None else total_bytes,
        now=now,
    )


def test_retention_prefix_without_limits_removes_nothing() -> None:
    """A retention with every field off keeps every record."""
    assert _prefix([(10, 0), (10, 1)], LogRetention()) == 0


def test_retention_prefix_counts_records_beyond_max_records() -> None:
    """max_records removes the oldest hot_count - max_records, counted over all hot records."""
    oldest = [(1, 0), (1, 0), (1, 0)]
    assert _prefix(oldest, LogRetention(max_records=2)) == 1
    assert _prefix(oldest, LogRetention(max_records=2), hot_count=5) == 3
    assert _prefix(oldest, LogRetention(max_records=5)) == 0


def test_retention_prefix_reclaims_bytes_until_within_budget() -> None:
    """max_bytes removes oldest records while the bytes held before each exceed the budget."""
    oldest = [(30, 0), (30, 0), (30, 0), (30, 0)]
    assert _prefix(oldest, LogRetention(max_bytes=60)) == 2
    assert _prefix(oldest, LogRetention(max_bytes=61)) == 2
    assert _prefix(oldest, LogRetention(max_bytes=59)) == 3
    assert _prefix(oldest, LogRetention(max_bytes=120)) == 0


def test_retention_prefix_expires_strictly_older_records() -> None:
    """max_age_ms removes records appended strictly before now - max_age_ms."""
    oldest = [(1, 100), (1, 199), (1, 200), (1, 50)]
    assert _prefix(oldest, LogRetention(max_age_ms=800), now=1_000) == 2


def test_retention_prefix_stops_at_the_first_kept_record() -> None:
    """Rules combine per record, and the first record none removes ends the prefix."""
    oldest = [(1, 0), (1, 900), (1, 0)]
    assert _prefix(oldest, LogRetention(max_records=2, max_age_ms=500), now=1_000) == 1
