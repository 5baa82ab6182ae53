"""The writes of a delivery's dead-letter phase: the intent stored before the DLQ write,
that write claimed like an attempt (so a write that takes the process down is counted),
resumed alone after such an interruption, or given back after a failure."""

from __future__ import annotations

from .._context import SqlStorage
from .._errors import SerializedError
from .engine import FanoutEngine
from .rows import Delivery


class DeadLetterWrites:
    """The dead-letter phase writes of one fanout (each in an alarm-reconciling
    transaction)."""

    __slots__ = ("_engine",)

    def __init__(self, engine: FanoutEngine) -> None:
        self._engine = engine

    async def mark(
        self,
        row: Delivery,
        *,
        reason: str,
        timestamp: int,
        retry_at: int,
        error: SerializedError | None,
        alone: bool,
    ) -> bool:
        """Persist the dead-letter intent before the DLQ write, and claim that write (run
        `alone` or not; the interruptions counted from now are the DLQ write's); False
        if the row changed, or is a DLQ write left by an interruption."""

        def write(sql: SqlStorage) -> bool:
            written = sql.exec(
                "UPDATE durability_fanout_deliveries SET phase = 'dead_letter', "
                "dead_lettered_at = ?, dead_letter_reason = ?, next_attempt_at = ?, "
                "last_error = ?, last_error_name = ?, claim_alone = ?, interruptions = 0, "
                "spared = 0 WHERE id = ? AND generation_id = ? AND status = 'pending' "
                "AND attempt = ? AND (phase = 'delivery' OR claim_alone IS NULL)",
                timestamp,
                reason,
                retry_at,
                None if error is None else error.message,
                None if error is None else error.name,
                1 if alone else 0,
                row.id,
                row.generation,
                row.attempt,
            ).rows_written
            return bool(written)

        return await self._engine.transaction(write)

    async def resume(self, row: Delivery, retry_at: int) -> bool:
        """Claim, alone, the DLQ write of `row` that an interruption left (counting it,
        spared if that write ran beside others); False if the row changed."""

        def write(sql: SqlStorage) -> bool:
            written = sql.exec(
                "UPDATE durability_fanout_deliveries SET interruptions = interruptions + 1, "
                "spared = spared + 1 - claim_alone, claim_alone = 1, next_attempt_at = ? "
                "WHERE id = ? AND generation_id = ? AND attempt = ? AND phase = 'dead_letter' "
                "AND claim_alone IS NOT NULL",
                retry_at,
                row.id,
                row.generation,
                row.attempt,
            ).rows_written
            return bool(written)

        return await self._engine.transaction(write)

    async def unclaim(self, row: Delivery) -> None:
        """The DLQ write of `row` failed (and will be tried again): it is no longer running."""

        def write(sql: SqlStorage) -> None:
            sql.exec(
                "UPDATE durability_fanout_deliveries SET claim_alone = NULL "
                "WHERE id = ? AND generation_id = ? AND attempt = ? AND phase = 'dead_letter'",
                row.id,
                row.generation,
                row.attempt,
            )

        await self._engine.transaction(write)
