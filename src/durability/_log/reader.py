"""Reading log records, hot from the object or rehydrated from cold storage.

Both `read()` and lease delivery go through here, so the truncation rules are the same
for both: an offset below the oldest readable one, a segment missing from the index,
a log without cold storage, or a segment the store no longer has all raise
`LogTruncatedError`, never return a silent gap.
"""

from __future__ import annotations

import inspect
from typing import Any

from .._errors import LogTruncatedError
from .._faults import cold_store_fault
from .store import LogStore, StoredBounds
from .types import LogColdStorage, LogRecord


class LogReader:
    """Pages of records: one segment's worth when cold, up to `limit` when hot."""

    def __init__(self, store: LogStore, cold: LogColdStorage | None) -> None:
        self._store = store
        self._cold = cold

    async def page(
        self, from_offset: int, limit: int, bounds: StoredBounds
    ) -> list[LogRecord[Any]]:
        """Records from `from_offset` on, ascending; a cold page never leaves its segment."""
        if from_offset < bounds.oldest_offset:
            raise LogTruncatedError(from_offset, bounds.oldest_offset)
        if from_offset < bounds.hot_offset:
            return await self._cold_page(from_offset, limit, bounds)
        return self._store.read_records(from_offset, limit)

    async def range(
        self, first_offset: int, last_offset: int, bounds: StoredBounds
    ) -> list[LogRecord[Any]]:
        """Every record of `first_offset..last_offset`, across segments and the hot window."""
        records: list[LogRecord[Any]] = []
        offset = first_offset
        while offset <= last_offset:
            page = await self.page(offset, last_offset - offset + 1, bounds)
            page = [record for record in page if record.offset <= last_offset]
            if not page:
                break
            records += page
            offset = page[-1].offset + 1
        return records

    async def _cold_page(
        self, from_offset: int, limit: int, bounds: StoredBounds
    ) -> list[LogRecord[Any]]:
        lost = LogTruncatedError(from_offset, max(from_offset + 1, bounds.hot_offset))
        segment = self._store.segment_containing(from_offset)
        if segment is None or self._cold is None:
            raise lost
        cold_store_fault("read")
        stored: object = self._cold.read(segment.locator)
        if inspect.isawaitable(stored):
            stored = await stored
        if stored is None:
            raise lost
        if not isinstance(stored, list) or not all(isinstance(r, LogRecord) for r in stored):
            raise TypeError("Cold storage read must return a list of LogRecord or None")
        records = sorted(
            (r for r in stored if from_offset <= r.offset <= segment.last_offset),
            key=lambda record: record.offset,
        )
        if not records or records[0].offset != from_offset:
            # The segment no longer holds the requested offset: report it, never skip it.
            raise lost
        return records[:limit]
