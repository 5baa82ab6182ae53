"""The fanout tables: manifests, delivery obligations and the sequence.

A manifest (`durability_fanout_messages`) holds the body once and counts the targets
still owing it (`remaining`); each (message, target) pair is a delivery row. Every
write after registration is a compare-and-set on the row's generation and attempt, so
a stale settlement changes nothing. Removing the last delivery deletes the manifest,
which frees its deduplication key. The number of delivery rows is cached in memory
(counted once, adjusted by each committed write, recounted after a failed one).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TypeVar

from .._context import SqlStorage
from .._errors import FanoutEnqueueError, SerializedError
from .engine import FanoutEngine, TurnBatch
from .fenced import claim_rows, claim_suspect_row, remove_rows
from .rows import Delivery, NewMessage, Registered, from_sql
from .writes import Registration, register_rows

T = TypeVar("T")

_ROW_QUERY = (
    "SELECT d.id, d.message_key, d.target_id, d.phase, d.attempt, d.last_error, "
    "d.last_error_name, d.generation_id, d.dead_lettered_at, d.dead_letter_reason, "
    "m.id AS message_id, m.payload, m.created_at AS enqueued_at, "
    "m.generation_id AS message_generation, d.claim_alone, d.interruptions, d.spared "
    "FROM durability_fanout_deliveries AS d "
    "LEFT JOIN durability_fanout_messages AS m ON m.key = d.message_key "
)

DUE_FIRST_QUERY = (
    _ROW_QUERY + "WHERE d.target_id = ? AND d.phase = 'delivery' "
    "AND d.attempt = 0 AND +d.next_attempt_at <= ? ORDER BY d.seq LIMIT ?"
)
"""A target's due rows never delivered yet, by sequence (bindings: target, now, limit)."""

DUE_RETRY_QUERY = (
    _ROW_QUERY + "WHERE d.target_id = ? AND d.phase IN ('delivery', 'dead_letter') "
    "AND d.attempt > 0 AND +d.next_attempt_at <= ? ORDER BY d.seq LIMIT ?"
)
"""A target's due rows already attempted, by sequence (bindings: target, now, limit)."""

NEXT_TARGET_QUERY = (
    "SELECT target_id FROM durability_fanout_deliveries WHERE target_id > ? "
    "ORDER BY target_id LIMIT 1"
)
"""The first target after the bound one that has delivery rows."""

FIRST_TARGET = "SELECT target_id FROM durability_fanout_deliveries ORDER BY target_id LIMIT 1"
"""The first target that has delivery rows."""


class DeliveryStore:
    """SQL over the fanout tables; every write runs in an alarm-reconciling transaction."""

    __slots__ = ("_count", "_engine", "_groups")

    def __init__(self, engine: FanoutEngine) -> None:
        self._engine = engine
        self._count: int | None = None
        self._groups: TurnBatch[Registration, list[Registered]] = TurnBatch(
            self._register_answered, engine.spawn, "enqueue"
        )
        engine.on_emptied(self._forget_count)

    # -- reads --------------------------------------------------------------------------

    def pending_count(self) -> int:
        """Delivery rows still owed (either phase)."""
        if self._count is None:
            cursor = self._engine.sql.exec("SELECT COUNT(*) FROM durability_fanout_deliveries")
            self._count = int(next(cursor.raw())[0])
        return self._count

    def target_ids(self) -> list[str]:
        """The distinct targets that have delivery rows (one index seek per target)."""
        found: list[str] = []
        sql = self._engine.sql
        while True:
            rows = (
                sql.exec(NEXT_TARGET_QUERY, found[-1]) if found else sql.exec(FIRST_TARGET)
            ).raw()
            row = next(rows, None)
            if row is None:
                return found
            found.append(str(row[0]))

    def due(self, target: str, now: int, limit: int) -> list[Delivery]:
        """Up to `limit` due rows of `target`: never-delivered ones first, then by sequence.

        Both queries walk the per-target due index (the unary `+` keeps the planner from
        scanning every due row of every target through the next-time index). Every row
        is pending (the table's CHECK), so no read filters on `status`.
        """
        sql = self._engine.sql
        first = list(map(from_sql, sql.exec(DUE_FIRST_QUERY, target, now, limit).raw()))
        if len(first) == limit:
            return first
        retries = sql.exec(DUE_RETRY_QUERY, target, now, limit - len(first)).raw()
        return first + list(map(from_sql, retries))

    def current(self, row: Delivery) -> tuple[str, int, str] | None:
        """`(generation, attempt, phase)` of the stored row with `row`'s id, if any."""
        found = self._engine.sql.exec(
            "SELECT generation_id, attempt, phase FROM durability_fanout_deliveries WHERE id = ?",
            row.id,
        ).raw()
        stored = next(found, None)
        return None if stored is None else (str(stored[0]), int(stored[1]), str(stored[2]))

    # -- writes -------------------------------------------------------------------------

    async def _write(self, write: Callable[[SqlStorage], T], *, due_now: bool = False) -> T:
        try:
            return await self._engine.transaction(write, due_now=due_now)
        except BaseException:
            self._count = None
            raise

    def _forget_count(self) -> None:
        self._count = None

    def _adjust(self, delta: int) -> None:
        if self._count is not None:
            self._count += delta

    def register(
        self,
        entries: Sequence[NewMessage],
        targets: tuple[str, ...],
        now: int,
        first_attempt_at: int,
    ) -> asyncio.Future[list[Registered]]:
        """Store every new entry with one row per target; the future of the new entries.

        An entry whose key is stored (or repeated in the batch) with the same id, body
        and targets is skipped; with different ones the whole batch is rejected with
        `FanoutEnqueueError` and nothing is written. Enqueues of one turn are stored
        together (a `TurnBatch`). Not a coroutine: the caller awaits the future itself.
        """
        return self._groups.add(Registration(entries, targets, now, first_attempt_at))

    async def _register_answered(
        self, requests: list[Registration]
    ) -> tuple[list[list[Registered] | Exception], None]:
        """`_register_group`, with nothing to run once its callers are answered."""
        return await self._register_group(requests), None

    async def _register_group(
        self, requests: list[Registration]
    ) -> list[list[Registered] | Exception]:
        """Register `requests` in one transaction: all together, or one at a time (each
        in a nested transaction) when one of them is rejected. If that transaction
        fails, it stored nothing: each request is retried in a transaction of its own,
        so an error one request causes reaches its caller only."""
        try:
            return await self._register_together(requests)
        except Exception:
            if len(requests) == 1:
                raise
        return [await self._register_apart(request) for request in requests]

    async def _register_apart(self, request: Registration) -> list[Registered] | Exception:
        """Register one request in a transaction of its own; its error, if it fails."""
        try:
            [outcome] = await self._register_together([request])
        except Exception as error:
            return error
        return outcome

    async def _register_together(
        self, requests: list[Registration]
    ) -> list[list[Registered] | Exception]:
        """Register `requests` in one transaction, each rejected one left out."""

        def write(sql: SqlStorage) -> list[list[Registered] | Exception]:
            try:
                return list(self._engine.nested(lambda inner: register_rows(inner, requests)))
            except FanoutEnqueueError:
                pass
            return [self._register_nested(request) for request in requests]

        due_now = any(request.first_attempt_at <= request.now for request in requests)
        outcomes = await self._write(write, due_now=due_now)
        for request, outcome in zip(requests, outcomes, strict=True):
            if not isinstance(outcome, Exception):
                self._adjust(len(outcome) * len(request.targets))
        return outcomes

    def _register_nested(self, request: Registration) -> list[Registered] | Exception:
        """Register one request in a nested transaction; its rejection, if it is rejected."""
        try:
            [created] = self._engine.nested(lambda sql: register_rows(sql, [request]))
        except FanoutEnqueueError as rejection:
            return rejection
        return created

    async def claim(
        self, batches: Sequence[tuple[Sequence[Delivery], int, int]], *, alone: bool
    ) -> list[list[Delivery]]:
        """Claim the rows of each batch `(rows, max_attempts, lease_until)` in one
        transaction: count one more attempt of each row still as read (and within its
        limit), leased until its batch's `lease_until`; the claimed rows of each."""
        return await self._write(
            lambda sql: [
                claim_rows(sql, rows, max_attempts, lease_until, alone)
                for rows, max_attempts, lease_until in batches
            ]
        )

    async def claim_suspect(self, row: Delivery, lease_until: int) -> Delivery | None:
        """Claim suspect `row` to run alone, leased until `lease_until` (see
        `claim_suspect_row`); `None` if it changed."""
        return await self._write(lambda sql: claim_suspect_row(sql, row, lease_until))

    async def postpone(self, rows: Sequence[Delivery], until: int) -> None:
        """Make rows due at `until` without counting an attempt (a missing target)."""

        def write(sql: SqlStorage) -> None:
            for row in rows:
                sql.exec(
                    "UPDATE durability_fanout_deliveries SET next_attempt_at = ? "
                    "WHERE id = ? AND generation_id = ? AND status = 'pending' AND attempt = ?",
                    until,
                    row.id,
                    row.generation,
                    row.attempt,
                )

        await self._write(write)

    async def remove(self, rows: Sequence[Delivery]) -> set[str]:
        """Delete each row still at its claimed attempt; the ids actually removed."""
        try:
            removed = self._engine.removal(lambda sql: remove_rows(sql, rows))
        except BaseException:
            self._count = None
            raise
        self._adjust(-len(removed))
        return removed

    async def settle_retry(
        self, row: Delivery, next_attempt_at: int, error: SerializedError
    ) -> bool:
        """Make the claimed row due again at `next_attempt_at`; False if it changed."""

        def write(sql: SqlStorage) -> bool:
            written = sql.exec(
                "UPDATE durability_fanout_deliveries SET next_attempt_at = ?, last_error = ?, "
                "last_error_name = ?, claim_alone = NULL WHERE id = ? AND generation_id = ? "
                "AND status = 'pending' AND attempt = ?",
                next_attempt_at,
                error.message,
                error.name,
                row.id,
                row.generation,
                row.attempt,
            ).rows_written
            return bool(written)

        return await self._write(write)

    async def sync(self) -> None:
        """Wait until every write so far is durable."""
        await self._engine.sync()
