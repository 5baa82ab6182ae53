"""Ready-made cold stores for `DurabilityLog(cold=...)`.

`FileColdStorage` keeps one JSON file per flushed segment in a local directory. The
log may write a segment more than once (a crash between the write and the index
update repeats it), so a segment file is written atomically and never overwritten.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ._files import sync_directory
from ._log import LogRecord, LogSegment
from ._serialization import check_json_value

__all__ = ["FileColdStorage"]


class FileColdStorage:
    """Segments as JSON files named by their zero-padded first offset.

    A file holds `{"firstOffset", "lastOffset", "records": [{"offset",
    "deduplicationKey", "body", "appendedAt"}]}` (the upstream keys). Offsets are
    never reused, so an existing file for the same first offset holds the same
    records: if it covers the segment its locator is returned as is; if it is shorter
    (an earlier, smaller flush), the segment goes to a file named by both offsets.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self._directory = Path(directory)

    @property
    def directory(self) -> Path:
        """Where the segment files live."""
        return self._directory

    async def write(self, segment: LogSegment[Any]) -> str:
        """Store `segment` unless a file already holds it; return its locator (file name)."""
        if not isinstance(segment, LogSegment):
            raise TypeError(f"segment must be a LogSegment, got {type(segment).__name__}")
        self._directory.mkdir(parents=True, exist_ok=True)
        name = f"{segment.first_offset:020d}.json"
        existing = self._last_offset(name)
        if existing is not None and existing < segment.last_offset:
            name = f"{segment.first_offset:020d}-{segment.last_offset:020d}.json"
            existing = self._last_offset(name)
        if existing is None:
            self._write_new(name, _encode(segment))
        return name

    async def read(self, locator: str) -> list[LogRecord[Any]] | None:
        """The records of the segment at `locator`, or `None` when its file is gone."""
        path = self._path(locator)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        return _decode(json.loads(text), locator)

    def _path(self, locator: str) -> Path:
        if not isinstance(locator, str):
            raise TypeError(f"locator must be a string, got {type(locator).__name__}")
        if not locator or locator != os.path.basename(locator) or locator.startswith("."):
            raise ValueError(f"locator must be a segment file name, got {locator!r}")
        return self._directory / locator

    def _last_offset(self, name: str) -> int | None:
        try:
            text = (self._directory / name).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        return int(json.loads(text)["lastOffset"])

    def _write_new(self, name: str, text: str) -> None:
        """Write atomically (temp file, fsync, link) and never replace an existing file."""
        fd, temp = tempfile.mkstemp(prefix=".segment-", suffix=".tmp", dir=self._directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(text)
                file.flush()
                os.fsync(file.fileno())
            try:
                os.link(temp, self._directory / name)
            except FileExistsError:
                return
            sync_directory(self._directory)
        finally:
            os.unlink(temp)


def _encode(segment: LogSegment[Any]) -> str:
    records = [
        {
            "offset": record.offset,
            "deduplicationKey": record.deduplication_key,
            "body": check_json_value(record.body, f"records[{index}].body"),
            "appendedAt": record.appended_at,
        }
        for index, record in enumerate(segment.records)
    ]
    return json.dumps(
        {
            "firstOffset": segment.first_offset,
            "lastOffset": segment.last_offset,
            "records": records,
        },
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )


def _decode(data: Any, locator: str) -> list[LogRecord[Any]]:
    try:
        return [
            LogRecord(
                offset=int(item["offset"]),
                deduplication_key=str(item["deduplicationKey"]),
                body=item["body"],
                appended_at=int(item["appendedAt"]),
            )
            for item in data["records"]
        ]
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"cold segment {locator!r} is malformed: {error!r}") from None
