"""The SQL of the retained log: records, the offset sequence, cursors and segments.

Every method is synchronous, as the object's SQL is; a method that writes more than
one statement runs them in one `transaction_sync`, so a failure leaves nothing behind.
Statements bind at most 100 parameters, the Workers SQL limit.

Invariants kept here: offsets are dense and never reused (`next_offset` only grows),
hot records are always a contiguous run ending at `next_offset - 1` (they are deleted
oldest first), and `total_bytes` is the sum of the hot records' `bytes`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._context import Storage
from .._serialization import deserialize
from .types import LogRecord

RECORDS = "durability_log_records"
CURSORS = "durability_log_cursors"
SEGMENTS = "durability_log_segments"
SEQ = "durability_log_seq"

_KEYS_PER_LOOKUP = 100
_ROWS_PER_INSERT = 20


@dataclass(frozen=True, slots=True)
class NewRecord:
    """A record ready to store: its key, envelope text and the envelope's UTF-8 size."""

    key: str
    payload: str
    bytes: int
    user_key: bool
    """False for a freshly drawn random key, which cannot already be stored."""


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A hot record as stored (the body still in its envelope)."""

    offset: int
    key: str
    payload: str
    bytes: int
    appended_at: int


@dataclass(frozen=True, slots=True)
class StoredBounds:
    """The raw offsets `bounds()` is computed from."""

    next_offset: int
    hot_offset: int
    oldest_offset: int


@dataclass(frozen=True, slots=True)
class SegmentRow:
    """One entry of the cold segment index."""

    first_offset: int
    last_offset: int
    locator: str


def to_records(rows: Sequence[tuple[int, str, str, int]]) -> list[LogRecord[Any]]:
    """Decode `(offset, key, payload, appended_at)` rows, parsing all envelopes at once.

    One JSON parse per page instead of one per record is most of the speed of a hot
    read. Anything but a plain value envelope is decoded on its own, so the TypeScript
    library's "undefined" envelope reads as `None` and a malformed one raises as usual.
    """
    if not rows:
        return []
    try:
        envelopes = json.loads("[" + ",".join([row[2] for row in rows]) + "]")
    except ValueError:
        envelopes = None
    if not isinstance(envelopes, list) or len(envelopes) != len(rows):
        envelopes = [None] * len(rows)
    records: list[LogRecord[Any]] = []
    for (offset, key, payload, appended_at), envelope in zip(rows, envelopes, strict=True):
        if type(envelope) is dict and len(envelope) == 2 and envelope.get("kind") == "value":
            body = envelope["value"]
        else:
            body = deserialize(payload)
        records.append(LogRecord(offset, key, body, appended_at))
    return records


class LogStore:
    """Synchronous access to the log's tables in one object's storage."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self._sql = storage.sql

    def append(self, records: Sequence[NewRecord], now: int) -> list[int]:
        """Store a batch atomically; one offset per input, reusing hot keys' offsets."""
        return self._storage.transaction_sync(lambda: self._append(records, now))

    def _append(self, records: Sequence[NewRecord], now: int) -> list[int]:
        offsets = self._existing_offsets([r.key for r in records if r.user_key])
        fresh: dict[str, NewRecord] = {}
        for record in records:
            if record.key not in offsets:
                # The first occurrence fixes the position, the last one the payload.
                fresh[record.key] = record
        if fresh:
            row = self._sql.exec(f"SELECT next_offset FROM {SEQ} WHERE id = 1").one()
            start = int(row["next_offset"])
            rows = list(fresh.values())
            for index, record in enumerate(rows):
                offsets[record.key] = start + index
            for chunk_start in range(0, len(rows), _ROWS_PER_INSERT):
                chunk = rows[chunk_start : chunk_start + _ROWS_PER_INSERT]
                values: list[Any] = []
                for index, record in enumerate(chunk, start + chunk_start):
                    values += (index, record.key, record.payload, record.bytes, now)
                placeholders = ",".join(["(?,?,?,?,?)"] * len(chunk))
                self._sql.exec(
                    f"INSERT INTO {RECORDS} (offset, dedup_key, payload, bytes, appended_at) "
                    f"VALUES {placeholders}",
                    *values,
                )
            self._sql.exec(
                f"UPDATE {SEQ} SET next_offset = ?, total_bytes = total_bytes + ? WHERE id = 1",
                start + len(rows),
                sum(record.bytes for record in rows),
            )
        return [offsets[record.key] for record in records]

    def _existing_offsets(self, keys: list[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        distinct = list(dict.fromkeys(keys))
        for start in range(0, len(distinct), _KEYS_PER_LOOKUP):
            chunk = distinct[start : start + _KEYS_PER_LOOKUP]
            placeholders = ",".join("?" * len(chunk))
            for key, offset in self._sql.exec(
                f"SELECT dedup_key, offset FROM {RECORDS} WHERE dedup_key IN ({placeholders})",
                *chunk,
            ).raw():
                found[key] = offset
        return found

    def bounds(self) -> StoredBounds:
        """The next offset, the lowest hot offset and the lowest readable offset."""
        next_offset, hot, segment = next(
            self._sql.exec(
                f"SELECT next_offset, (SELECT MIN(offset) FROM {RECORDS}), "
                f"(SELECT MIN(first_offset) FROM {SEGMENTS}) FROM {SEQ} WHERE id = 1"
            ).raw()
        )
        hot_offset = next_offset if hot is None else hot
        oldest = hot_offset if segment is None else min(segment, hot_offset)
        return StoredBounds(next_offset=next_offset, hot_offset=hot_offset, oldest_offset=oldest)

    def read_hot(self, from_offset: int, limit: int) -> list[StoredRecord]:
        """Hot records at or after `from_offset`, ascending, at most `limit`."""
        return [
            StoredRecord(offset, key, payload, size, appended_at)
            for offset, key, payload, size, appended_at in self._sql.exec(
                f"SELECT offset, dedup_key, payload, bytes, appended_at FROM {RECORDS} "
                "WHERE offset >= ? ORDER BY offset LIMIT ?",
                from_offset,
                limit,
            ).raw()
        ]

    def read_records(self, from_offset: int, limit: int) -> list[LogRecord[Any]]:
        """Hot records at or after `from_offset`, ascending, at most `limit`, decoded."""
        return to_records(
            list(
                self._sql.exec(
                    f"SELECT offset, dedup_key, payload, appended_at FROM {RECORDS} "
                    "WHERE offset >= ? ORDER BY offset LIMIT ?",
                    from_offset,
                    limit,
                ).raw()
            )
        )

    def segment_containing(self, offset: int) -> SegmentRow | None:
        """The indexed segment whose range holds `offset`, if any."""
        for first, last, locator in self._sql.exec(
            f"SELECT first_offset, last_offset, locator FROM {SEGMENTS} "
            "WHERE first_offset <= ? ORDER BY first_offset DESC LIMIT 1",
            offset,
        ).raw():
            if last >= offset:
                return SegmentRow(first, last, locator)
        return None

    def hot_stats(self) -> tuple[int, int]:
        """How many records are hot, and their summed bytes."""
        count, total = next(
            self._sql.exec(
                f"SELECT (SELECT COUNT(*) FROM {RECORDS}), total_bytes FROM {SEQ} WHERE id = 1"
            ).raw()
        )
        return int(count), int(total)

    def flush(self, segment: SegmentRow, size: int, count: int, now: int) -> int:
        """Index a written segment, then delete its records from the object; one transaction."""

        def write() -> int:
            self._sql.exec(
                f"INSERT INTO {SEGMENTS} (first_offset, last_offset, locator, bytes, flushed_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT(first_offset) DO UPDATE SET "
                "last_offset = excluded.last_offset, locator = excluded.locator, "
                "bytes = excluded.bytes, flushed_at = excluded.flushed_at",
                segment.first_offset,
                segment.last_offset,
                segment.locator,
                size,
                now,
            )
            return self._delete_oldest(count, segment.last_offset + 1)

        return self._storage.transaction_sync(write)

    def delete_oldest(self, count: int, below: int) -> int:
        """Delete up to `count` oldest hot records below offset `below`; how many went."""
        return self._storage.transaction_sync(lambda: self._delete_oldest(count, below))

    def _delete_oldest(self, count: int, below: int) -> int:
        rows = list(
            self._sql.exec(
                f"SELECT offset, bytes FROM {RECORDS} WHERE offset < ? ORDER BY offset LIMIT ?",
                below,
                count,
            ).raw()
        )
        if not rows:
            return 0
        self._sql.exec(f"DELETE FROM {RECORDS} WHERE offset <= ?", rows[-1][0])
        self._sql.exec(
            f"UPDATE {SEQ} SET total_bytes = MAX(0, total_bytes - ?) WHERE id = 1",
            sum(size for _, size in rows),
        )
        return len(rows)

    def forget_segments_before(self, offset: int) -> int:
        """Drop index entries of segments that end below `offset`; how many went."""

        def write() -> int:
            count = self._sql.exec(
                f"SELECT COUNT(*) AS n FROM {SEGMENTS} WHERE last_offset < ?", offset
            ).one()["n"]
            self._sql.exec(f"DELETE FROM {SEGMENTS} WHERE last_offset < ?", offset)
            return int(count)

        return self._storage.transaction_sync(write)

    def cursor(self, consumer: str) -> int | None:
        """The committed offset of `consumer`, or `None` before its first commit."""
        for (offset,) in self._sql.exec(
            f"SELECT offset FROM {CURSORS} WHERE consumer = ?", consumer
        ).raw():
            return int(offset)
        return None

    def commit(self, consumer: str, offset: int, now: int) -> None:
        """Move a cursor forward; an equal or lower offset changes nothing."""
        self._sql.exec(
            f"INSERT INTO {CURSORS} (consumer, offset, committed_at) VALUES (?, ?, ?) "
            "ON CONFLICT(consumer) DO UPDATE SET offset = excluded.offset, "
            f"committed_at = excluded.committed_at WHERE excluded.offset > {CURSORS}.offset",
            consumer,
            offset,
            now,
        )

    def cursors(self) -> dict[str, int]:
        """Every committed cursor, ordered by consumer name."""
        return {
            consumer: int(offset)
            for consumer, offset in self._sql.exec(
                f"SELECT consumer, offset FROM {CURSORS} ORDER BY consumer"
            ).raw()
        }

    def backlog(self) -> int:
        """Records between the furthest-behind cursor and the head; 0 without cursors."""
        next_offset, lowest = next(
            self._sql.exec(
                f"SELECT next_offset, (SELECT MIN(offset) FROM {CURSORS}) FROM {SEQ} WHERE id = 1"
            ).raw()
        )
        return 0 if lowest is None else max(0, int(next_offset) - int(lowest))
