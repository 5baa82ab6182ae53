"""`trim()`: retention applied to the oldest hot records, flushed to cold storage first
when the log has one (each run of records is written and indexed before it is deleted,
so a failed write keeps them hot)."""

from __future__ import annotations

import asyncio
from typing import Any

from .._clock import now_ms
from .._context import Storage
from .identity import log_id, writing_for
from .retention import retention_prefix
from .store import LogStore, SegmentRow, StoredRecord, to_records
from .types import LogColdStorage, LogRetention, LogSegment


class Trimmer:
    """Trims one log."""

    __slots__ = (
        "_cold",
        "_lock",
        "_max_batch_size",
        "_object_id",
        "_retention",
        "_storage",
        "_store",
    )

    def __init__(
        self,
        store: LogStore,
        storage: Storage,
        object_id: object,
        retention: LogRetention | None,
        cold: LogColdStorage | None,
        max_batch_size: int,
    ) -> None:
        self._store = store
        self._storage = storage
        self._object_id = object_id
        self._retention = retention
        self._cold = cold
        self._max_batch_size = max_batch_size
        self._lock = asyncio.Lock()

    async def trim(self) -> int:
        """Apply retention oldest first (one trim at a time); how many records left the
        object."""
        retention = self._retention
        if retention is None:
            return 0
        async with self._lock:
            removed = 0
            while True:
                rows = self._store.read_hot(0, self._max_batch_size)
                if not rows:
                    return removed
                hot_count, total_bytes = self._store.hot_stats()
                count = retention_prefix(
                    [(row.bytes, row.appended_at) for row in rows],
                    retention=retention,
                    hot_count=hot_count,
                    total_bytes=total_bytes,
                    now=now_ms(),
                )
                if count == 0:
                    return removed
                deleted = await self._remove(rows[:count])
                removed += deleted
                if deleted < count:
                    # Fewer went than asked: stop, so this call never flushes the rest again.
                    return removed

    async def _remove(self, prefix: list[StoredRecord]) -> int:
        """Delete `prefix` (the oldest hot records), flushing it to cold storage first
        when there is one; how many records were deleted."""
        first, last = prefix[0].offset, prefix[-1].offset
        cold = self._cold
        if cold is None:
            return self._store.delete_oldest(len(prefix), last + 1)
        segment: LogSegment[Any] = LogSegment(
            first,
            last,
            to_records([(r.offset, r.key, r.payload, r.appended_at) for r in prefix]),
        )
        locator = await writing_for(
            log_id(self._storage, self._object_id), lambda: cold.write(segment)
        )
        if not isinstance(locator, str) or not locator:
            raise TypeError("Cold storage must return a non-empty locator")
        return self._store.flush(
            SegmentRow(first, last, locator),
            sum(row.bytes for row in prefix),
            len(prefix),
            now_ms(),
        )
