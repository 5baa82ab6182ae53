"""Ready-made cold stores for `DurabilityLog(cold=...)`.

`FileColdStorage` keeps one JSON file per flushed segment in a local directory. The
log may write a segment more than once (a crash between the write and the index
update repeats it), so a segment file is written atomically and never overwritten,
and an existing file is reused only after checking it holds the same records.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from ._files import sync_directory
from ._log import LogRecord, LogSegment
from ._log.identity import current_log_id
from ._serialization import check_json_value

__all__ = ["FileColdStorage", "current_log_id"]

STALE_TEMP_SECONDS = 3_600
"""A temporary file this old belongs to no write in progress (one takes milliseconds):
it was left by a killed process and is removed."""

_TEMP_PREFIX = ".segment-"
_SAFE_ID = re.compile(r"[0-9A-Za-z_][0-9A-Za-z_.-]{0,99}")


class FileColdStorage:
    """Segments as JSON files named by their log and their offsets.

    A file holds `{"firstOffset", "lastOffset", "records": [{"offset",
    "deduplicationKey", "body", "appendedAt"}]}` (the TypeScript library's keys), plus `"logId"`.
    It is named `<log id>-<first offset>.json`, zero-padded (the log id is
    `current_log_id()`). A write finding that file reuses it only if it holds exactly
    the segment's records; otherwise (an earlier, shorter flush, or a segment of
    another log) the segment goes to a file named by both offsets, then by both
    offsets and a digest of its content. A write outside a log's trim has no log id:
    its file is `<first offset>.json`, reused when it reaches as far (the TypeScript
    library's rule, by first offset alone). Temporary files left by a killed
    process are removed once they are an hour old.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self._directory = Path(directory)
        self._swept = False

    @property
    def directory(self) -> Path:
        """Where the segment files live."""
        return self._directory

    async def write(self, segment: LogSegment[Any]) -> str:
        """Store `segment` unless a file already holds it; return its locator (file name)."""
        if not isinstance(segment, LogSegment):
            raise TypeError(f"segment must be a LogSegment, got {type(segment).__name__}")
        log_id = current_log_id()
        text = _encode(segment, log_id)
        expected = json.loads(text)
        self._directory.mkdir(parents=True, exist_ok=True)
        if not self._swept:
            self._swept = True
            self._remove_stale_temps()
        for name in _candidates(segment, log_id, text):
            existing = self._load(name)
            if existing is None:
                if self._write_new(name, text):
                    return name
                existing = self._load(name)
            if _reusable(existing, expected, log_id):
                return name
        raise ValueError(
            f"cold segment {segment.first_offset}..{segment.last_offset} of log "
            f"{log_id!r}: every candidate file in {self._directory} holds other records"
        )

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

    def _load(self, name: str) -> object:
        """The parsed file `name`; `None` if there is none ("" if it is not JSON)."""
        try:
            text = (self._directory / name).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            data: object = json.loads(text)
        except ValueError:
            return ""
        return data

    def _remove_stale_temps(self) -> None:
        cutoff = time.time() - STALE_TEMP_SECONDS
        for path in self._directory.glob(f"{_TEMP_PREFIX}*.tmp"):
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
            except FileNotFoundError:
                continue

    def _write_new(self, name: str, text: str) -> bool:
        """Write atomically (temp file, fsync, link); False if `name` appeared meanwhile."""
        fd, temp = tempfile.mkstemp(prefix=_TEMP_PREFIX, suffix=".tmp", dir=self._directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(text)
                file.flush()
                os.fsync(file.fileno())
            try:
                os.link(temp, self._directory / name)
            except FileExistsError:
                return False
            sync_directory(self._directory)
            return True
        finally:
            os.unlink(temp)


def _candidates(segment: LogSegment[Any], log_id: str, text: str) -> list[str]:
    """The file names a segment may take, in order of preference."""
    if not log_id:
        prefix = ""
    elif _SAFE_ID.fullmatch(log_id):
        prefix = f"{log_id}-"
    else:
        prefix = hashlib.sha256(log_id.encode("utf-8")).hexdigest()[:32] + "-"
    first = f"{prefix}{segment.first_offset:020d}"
    both = f"{first}-{segment.last_offset:020d}"
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return [f"{first}.json", f"{both}.json", f"{both}-{digest}.json"]


def _reusable(data: object, expected: dict[str, Any], log_id: str) -> bool:
    """Whether an existing segment file can stand for the segment being written.

    With a log id, only a file holding exactly the segment's records. Without one (a
    write outside a log's trim) nothing tells two segments with the same first offset
    apart, so the TypeScript library's rule applies: a file reaching as far is trusted.
    """
    if log_id:
        return _holds(data, expected)
    if not isinstance(data, dict):
        return False
    last = data.get("lastOffset")
    return isinstance(last, int) and last >= expected["lastOffset"]


def _holds(data: object, expected: dict[str, Any]) -> bool:
    """Whether a parsed segment file holds every record of `expected`, the same way."""
    if not isinstance(data, dict) or data.get("logId", "") != expected.get("logId", ""):
        return False
    records = data.get("records")
    if not isinstance(records, list):
        return False
    low, high = expected["firstOffset"], expected["lastOffset"]
    inside = [
        record
        for record in records
        if isinstance(record, dict)
        and isinstance(record.get("offset"), int)
        and low <= record["offset"] <= high
    ]
    return bool(inside == expected["records"])


def _encode(segment: LogSegment[Any], log_id: str) -> str:
    records = [
        {
            "offset": record.offset,
            "deduplicationKey": record.deduplication_key,
            "body": check_json_value(record.body, f"records[{index}].body"),
            "appendedAt": record.appended_at,
        }
        for index, record in enumerate(segment.records)
    ]
    data: dict[str, Any] = {
        "firstOffset": segment.first_offset,
        "lastOffset": segment.last_offset,
        "records": records,
    }
    if log_id:
        data["logId"] = log_id
    return json.dumps(
        data,
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
