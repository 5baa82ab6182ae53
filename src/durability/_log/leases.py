"""Consumer leases over the retained log: durable ranges, fencing, ordered commits.

A lease row is one range of offsets held by one worker of a consumer. It is stored
before its records are returned, so eviction mid-flight releases nothing early. Every
redelivery draws a fresh batch id, which fences the previous holder. A consumer's
allocation (the highest offset handed out + 1) runs ahead of its cursor; the cursor
moves only over an unbroken run of settled (acked or skipped) ranges.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass, replace
from typing import Any

from .._clock import now_ms
from .._context import Storage
from .._engine import report_failure
from .._errors import LogLeaseError, LogTruncatedError
from .._uuid import random_uuid
from .reader import LogReader
from .store import LogStore
from .types import LeaseRow, LeaseState, LogLease, LogLeaseOptions

LEASES = "durability_log_leases"
ALLOCATIONS = "durability_log_allocations"

_COLUMNS = "batch_id, consumer, first_offset, last_offset, state, attempt, expires_at, created_at"


@dataclass(frozen=True, slots=True)
class _Reclaimed:
    """The outcome of reclaiming: a row to redeliver, or a range cut by retention."""

    row: LeaseRow
    truncated: LogTruncatedError | None


class LogLeases:
    """`lease`, `ack`, `nack` and `leases` of one `DurabilityLog`."""

    def __init__(
        self,
        storage: Storage,
        store: LogStore,
        reader: LogReader,
        options: LogLeaseOptions,
        max_batch_size: int,
    ) -> None:
        self._storage = storage
        self._sql = storage.sql
        self._store = store
        self._reader = reader
        self._options = options
        self._max_batch_size = max_batch_size
        self._lock = asyncio.Lock()

    async def lease(self, consumer: str, size: int) -> LogLease[Any] | None:
        """Redeliver the lowest claimable range; only when none is claimable, allocate a new one."""
        async with self._lock:
            now = now_ms()
            reclaimed = self._storage.transaction_sync(lambda: self._reclaim(consumer, now))
            if reclaimed is None:
                return await self._new_range(consumer, size, now)
            if reclaimed.truncated is not None:
                raise reclaimed.truncated
            row = reclaimed.row
            records = await self._reader.range(
                row.first_offset, row.last_offset, self._store.bounds()
            )
            lease = LogLease(
                batch_id=row.batch_id,
                consumer=consumer,
                records=records,
                first_offset=row.first_offset,
                last_offset=row.last_offset,
                attempt=row.attempt,
                expires_at=row.expires_at,
            )
            max_attempts, on_poison = self._options.max_attempts, self._options.on_poison
            if max_attempts is None or on_poison is None or row.attempt <= max_attempts:
                return lease
            self._settle_row(row.batch_id, "skipped", now)
        # The skip is written first, so a failing handler cannot resurrect the range.
        await self._storage.sync()
        try:
            result = on_poison(lease)
            if inspect.isawaitable(result):
                await result
        except Exception as error:
            report_failure("durability.log.poison_handler.failed", {"consumer": consumer}, error)
        return None

    def _reclaim(self, consumer: str, now: int) -> _Reclaimed | None:
        """Take `consumer`'s lowest claimable range (inside the caller's transaction)."""
        row = self._claimable(consumer, now)
        if row is None:
            return None
        oldest = self._store.bounds().oldest_offset
        if row.first_offset < oldest:
            self._drop_trimmed(row, oldest)
            return _Reclaimed(row, LogTruncatedError(row.first_offset, oldest))
        return _Reclaimed(self._redeliver(row, now), None)

    def _claimable(self, consumer: str, now: int) -> LeaseRow | None:
        """The lowest range of `consumer` that is nacked, or active and expired at `now`."""
        for found in self._sql.exec(
            f"SELECT {_COLUMNS} FROM {LEASES} WHERE consumer = ? AND "
            "(state = 'pending' OR (state = 'active' AND expires_at <= ?)) "
            "ORDER BY first_offset LIMIT 1",
            consumer,
            now,
        ):
            return LeaseRow(**found)
        return None

    def _drop_trimmed(self, row: LeaseRow, oldest: int) -> None:
        """Retention trimmed the start of `row`: drop those offsets for good (reported
        once by the caller) and leave the rest claimable without counting an attempt."""
        state, first = ("skipped", row.first_offset)
        if row.last_offset >= oldest:
            state, first = ("pending", oldest)
        self._sql.exec(
            f"UPDATE {LEASES} SET batch_id = ?, state = ?, first_offset = ?, "
            "expires_at = 0 WHERE batch_id = ?",
            random_uuid(),
            state,
            first,
            row.batch_id,
        )

    def _redeliver(self, row: LeaseRow, now: int) -> LeaseRow:
        """Hand `row` out again under a fresh batch id (fencing its previous holder)."""
        redelivered = replace(
            row,
            batch_id=random_uuid(),
            state="active",
            attempt=row.attempt + 1,
            expires_at=now + self._options.lease_ms,
        )
        self._sql.exec(
            f"UPDATE {LEASES} SET batch_id = ?, state = 'active', attempt = ?, "
            "expires_at = ? WHERE batch_id = ?",
            redelivered.batch_id,
            redelivered.attempt,
            redelivered.expires_at,
            row.batch_id,
        )
        return redelivered

    async def _new_range(self, consumer: str, size: int, now: int) -> LogLease[Any] | None:
        held = self._sql.exec(
            f"SELECT COUNT(*) AS n FROM {LEASES} WHERE consumer = ? AND "
            "(state = 'pending' OR (state = 'active' AND expires_at > ?))",
            consumer,
            now,
        ).one()["n"]
        if held >= self._options.max_parallelism:
            return None
        bounds = self._store.bounds()
        start = max(
            bounds.oldest_offset, self._store.cursor(consumer) or 0, self._allocation(consumer)
        )
        if start >= bounds.next_offset:
            return None
        records = await self._reader.page(start, size, bounds)
        if not records:
            return None
        first, last = records[0].offset, records[-1].offset
        batch_id = random_uuid()
        expires_at = now + self._options.lease_ms

        def write() -> None:
            self._sql.exec(
                f"INSERT INTO {LEASES} ({_COLUMNS}) VALUES (?, ?, ?, ?, 'active', 1, ?, ?)",
                batch_id,
                consumer,
                first,
                last,
                expires_at,
                now,
            )
            self._sql.exec(
                f"INSERT INTO {ALLOCATIONS} (consumer, allocated_offset) VALUES (?, ?) "
                "ON CONFLICT(consumer) DO UPDATE SET allocated_offset = excluded.allocated_offset",
                consumer,
                last + 1,
            )

        self._storage.transaction_sync(write)
        return LogLease(batch_id, consumer, records, first, last, 1, expires_at)

    def _allocation(self, consumer: str) -> int:
        for (offset,) in self._sql.exec(
            f"SELECT allocated_offset FROM {ALLOCATIONS} WHERE consumer = ?", consumer
        ).raw():
            return int(offset)
        return 0

    def _settle_row(self, batch_id: str, state: LeaseState, hold_ended_at: int) -> None:
        """End the hold on a range: `expires_at` becomes `hold_ended_at`.

        A settled range's `expires_at` is when its hold ended: now when it is acked or
        skipped, 0 when it is nacked (so it is claimable at once).
        """
        self._sql.exec(
            f"UPDATE {LEASES} SET state = ?, expires_at = ? WHERE batch_id = ?",
            state,
            hold_ended_at,
            batch_id,
        )

    def _settle(self, consumer: str, batch_id: str, state: LeaseState, hold_ended_at: int) -> None:
        found = self._sql.exec(
            f"SELECT 1 FROM {LEASES} WHERE batch_id = ? AND consumer = ? AND state = 'active'",
            batch_id,
            consumer,
        ).to_list()
        if not found:
            raise LogLeaseError(batch_id)
        self._settle_row(batch_id, state, hold_ended_at)

    async def ack(self, consumer: str, batch_id: str) -> None:
        """Settle a held range as done, then commit over every settled range in a row."""
        now = now_ms()

        def write() -> None:
            self._settle(consumer, batch_id, "acked", now)
            self._advance(consumer, now)

        self._storage.transaction_sync(write)

    async def nack(self, consumer: str, batch_id: str) -> None:
        """Give a held range back for immediate redelivery; the cursor does not move."""
        self._storage.transaction_sync(lambda: self._settle(consumer, batch_id, "pending", 0))

    def _advance(self, consumer: str, now: int) -> None:
        # Offsets trimmed before anyone leased them are passed over, never waited for.
        start = max(self._store.cursor(consumer) or 0, self._store.bounds().oldest_offset)
        cursor = start
        while True:
            rows = list(
                self._sql.exec(
                    f"SELECT first_offset, last_offset, state FROM {LEASES} "
                    "WHERE consumer = ? AND last_offset >= ? ORDER BY first_offset LIMIT ?",
                    consumer,
                    cursor,
                    self._max_batch_size,
                ).raw()
            )
            walked = 0
            for first, last, state in rows:
                if first > cursor or state not in ("acked", "skipped"):
                    break
                cursor = max(cursor, last + 1)
                walked += 1
            if walked == 0 or walked < len(rows) or len(rows) < self._max_batch_size:
                break
        if cursor == start:
            return
        self._store.commit(consumer, cursor, now)
        self._sql.exec(
            f"DELETE FROM {LEASES} WHERE consumer = ? AND last_offset < ? "
            "AND state IN ('acked', 'skipped')",
            consumer,
            cursor,
        )

    def rows(self, consumer: str) -> list[LeaseRow]:
        """Every stored range of `consumer`, ordered by first offset."""
        return [
            LeaseRow(**row)
            for row in self._sql.exec(
                f"SELECT {_COLUMNS} FROM {LEASES} WHERE consumer = ? ORDER BY first_offset",
                consumer,
            )
        ]
