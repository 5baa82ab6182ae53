"""FileColdStorage: one atomic, never-overwritten JSON file per segment."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import START_MS, MakeRuntime
from durability import (
    DurabilityLog,
    LogAppendInput,
    LogRecord,
    LogRetention,
    LogSegment,
)
from durability._log.identity import writing_for
from durability.cold import STALE_TEMP_SECONDS, FileColdStorage
from durability.runtime import DurableObject


def _segment(first: int, last: int, body: str = "x") -> LogSegment[str]:
    return LogSegment(
        first,
        last,
        [
            LogRecord(offset, f"k{offset}", f"{body}{offset}", 1_000 + offset)
            for offset in range(first, last + 1)
        ],
    )


async def test_write_then_read_round_trips(tmp_path: Path) -> None:
    """A written segment reads back as the same records."""
    store = FileColdStorage(tmp_path / "segments")
    segment = _segment(0, 2)
    locator = await store.write(segment)
    assert await store.read(locator) == segment.records


async def test_file_is_named_by_first_offset_with_upstream_keys(tmp_path: Path) -> None:
    """The file is named by its zero-padded first offset and keeps camelCase keys."""
    store = FileColdStorage(tmp_path)
    locator = await store.write(_segment(5, 6))
    assert locator == "00000000000000000005.json"
    data = json.loads((tmp_path / locator).read_text())
    assert data["firstOffset"] == 5
    assert data["lastOffset"] == 6
    assert data["records"][0] == {
        "offset": 5,
        "deduplicationKey": "k5",
        "body": "x5",
        "appendedAt": 1005,
    }


async def test_existing_segment_is_never_overwritten(tmp_path: Path) -> None:
    """A repeated write keeps the existing file and returns its locator."""
    store = FileColdStorage(tmp_path)
    first = await store.write(_segment(0, 1, "original"))
    again = await store.write(_segment(0, 1, "changed"))
    assert again == first
    records = await store.read(first)
    assert records is not None
    assert [r.body for r in records] == ["original0", "original1"]


async def test_a_logs_segment_is_reused_only_when_it_holds_the_same_records(
    tmp_path: Path,
) -> None:
    """Within one log, a file is reused for the same records; other records get their own."""
    store = FileColdStorage(tmp_path)
    first = await writing_for("obj.epoch", lambda: store.write(_segment(0, 1, "original")))
    assert first == "obj.epoch-00000000000000000000.json"
    assert await writing_for("obj.epoch", lambda: store.write(_segment(0, 1, "original"))) == first
    changed = await writing_for("obj.epoch", lambda: store.write(_segment(0, 1, "changed")))
    assert changed != first
    for locator, body in ((first, "original"), (changed, "changed")):
        records = await store.read(str(locator))
        assert records is not None
        assert [r.body for r in records] == [f"{body}0", f"{body}1"]
    assert json.loads((tmp_path / first).read_text())["logId"] == "obj.epoch"


async def test_longer_segment_over_a_shorter_orphan_gets_its_own_file(tmp_path: Path) -> None:
    """A segment longer than an orphan with the same first offset is kept whole elsewhere."""
    store = FileColdStorage(tmp_path)
    short = await store.write(_segment(0, 1))
    longer = await store.write(_segment(0, 3))
    assert longer != short
    records = await store.read(longer)
    assert records is not None
    assert [r.offset for r in records] == [0, 1, 2, 3]
    assert await store.write(_segment(0, 3)) == longer


async def test_missing_segment_reads_none(tmp_path: Path) -> None:
    """Reading a segment whose file is gone returns None."""
    store = FileColdStorage(tmp_path)
    locator = await store.write(_segment(0, 0))
    (tmp_path / locator).unlink()
    assert await store.read(locator) is None


async def test_no_temporary_files_are_left(tmp_path: Path) -> None:
    """Only the segment files remain after writes, repeated ones included."""
    store = FileColdStorage(tmp_path)
    await store.write(_segment(0, 0))
    await store.write(_segment(0, 0))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00000000000000000000.json"]


async def test_bad_locator_and_segment_are_rejected(tmp_path: Path) -> None:
    """A locator that is not a plain file name, or a non-segment, raises."""
    store = FileColdStorage(tmp_path)
    with pytest.raises(ValueError, match="locator"):
        await store.read("../etc/passwd")
    with pytest.raises(TypeError, match="locator"):
        await store.read(7)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="segment"):
        await store.write({"firstOffset": 0})  # type: ignore[arg-type]


async def test_malformed_segment_file_raises(tmp_path: Path) -> None:
    """A segment file without records is reported, not read as empty."""
    store = FileColdStorage(tmp_path)
    (tmp_path / "00000000000000000000.json").write_text('{"firstOffset": 0}')
    with pytest.raises(ValueError, match="malformed"):
        await store.read("00000000000000000000.json")


async def test_non_json_body_is_rejected(tmp_path: Path) -> None:
    """A record body that is not JSON is refused before any file is written."""
    store = FileColdStorage(tmp_path)
    with pytest.raises(TypeError):
        await store.write(LogSegment(0, 0, [LogRecord(0, "k", {1, 2}, 0)]))
    assert list(tmp_path.iterdir()) == []


class _LogObject(DurableObject):
    """A log flushing every record but the newest to a shared cold directory."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.log: DurabilityLog[Any] = DurabilityLog(
            context=ctx,
            retention=LogRetention(max_records=1),
            cold=FileColdStorage(env.COLD_DIR),
        )

    async def append_and_trim(self, bodies: list[str]) -> int:
        await self.log.append([LogAppendInput(body) for body in bodies])
        return await self.log.trim()

    async def bodies(self) -> list[Any]:
        bodies, offset = [], 0
        while (page := await self.log.read(offset)).records:
            bodies += [record.body for record in page.records]
            offset = page.next_offset
        return bodies

    async def wipe(self) -> None:
        await self.ctx.storage.delete_all()


async def test_segments_after_delete_all_never_reuse_old_files(
    tmp_path: Path, make_runtime: MakeRuntime
) -> None:
    """After delete_all(), offsets restart at 0 but trim never serves the old segment files."""
    bindings = {"LOGS": _LogObject, "COLD_DIR": str(tmp_path / "cold")}
    async with make_runtime(path=tmp_path / "objects", bindings=bindings) as rt:
        stub = rt.env.LOGS.get_by_name("p")
        assert await stub.append_and_trim(["old-a", "old-b", "old-c"]) == 2
        await stub.wipe()
        await rt.evict(stub)
        assert await stub.append_and_trim(["new-a", "new-b", "new-c"]) == 2
        assert await stub.bodies() == ["new-a", "new-b", "new-c"]


async def test_objects_sharing_a_cold_directory_keep_their_own_segments(
    tmp_path: Path, make_runtime: MakeRuntime
) -> None:
    """Two logs flushing the same offsets into one directory each read back their own records."""
    bindings = {"LOGS": _LogObject, "COLD_DIR": str(tmp_path / "cold")}
    async with make_runtime(path=None, bindings=bindings) as rt:
        one, two = rt.env.LOGS.get_by_name("one"), rt.env.LOGS.get_by_name("two")
        assert await one.append_and_trim(["1a", "1b"]) == 1
        assert await two.append_and_trim(["2a", "2b"]) == 1
        assert await one.bodies() == ["1a", "1b"]
        assert await two.bodies() == ["2a", "2b"]


async def test_stale_temporary_files_of_a_killed_writer_are_removed(tmp_path: Path) -> None:
    """Temp files a killed process left are removed; one young enough to be in use stays."""
    stale, fresh = tmp_path / ".segment-killed.tmp", tmp_path / ".segment-writing.tmp"
    stale.write_text('{"firstOffset": 0')
    fresh.write_text('{"firstOffset": 3')
    old = time.time() - STALE_TEMP_SECONDS - 60
    os.utime(stale, (old, old))
    store = FileColdStorage(tmp_path)
    locator = await store.write(_segment(0, 0))
    assert sorted(p.name for p in tmp_path.iterdir()) == [fresh.name, locator]


async def test_file_cold_storage_round_trip(tmp_path: Path) -> None:
    """`FileColdStorage` returns a non-empty locator, reads the records back, None if gone."""
    cold = FileColdStorage(tmp_path / "cold")
    segment: LogSegment[Any] = LogSegment(
        0, 1, [LogRecord(0, "k0", {"a": 1}, START_MS), LogRecord(1, "k1", "b", START_MS)]
    )
    locator = await cold.write(segment)
    assert isinstance(locator, str) and locator
    assert await cold.read(locator) == segment.records
    assert await cold.write(segment) == locator
    assert await cold.read("00000000000000000099.json") is None
