"""Moving a recurring named alarm between its slots, in the transactions that settle it.

A pass applies the catch-up policy to recurrences whose next slot is due too; a settled
occurrence (succeeded, or failed for good) moves its recurrence to the following slot.
`moved(name, generation, slot, now)` is told after each write that moved one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._clock import now_ms
from .._context import SqlStorage
from .._engine import Engine
from .._uuid import random_uuid
from .recurrence import Recurrence, RecurrenceSlot, catch_up, next_slot
from .recurrence import loaded as loaded_recurrence
from .rows import move_to_slot

Moved = Callable[[str, str, RecurrenceSlot, int], None]


class SlotMover:
    """The slot moves of one `DurabilityAlarms` (its engine, and whom to tell)."""

    __slots__ = ("_engine", "_moved")

    def __init__(self, engine: Engine, moved: Moved) -> None:
        self._engine = engine
        self._moved = moved

    async def catch_up(self, rows: list[tuple[Any, ...]], now: int) -> list[tuple[Any, ...]]:
        """Apply the catch-up policy to recurrences whose next slot is also due.

        Only a slot no attempt has started on moves: the moved rows are written in one
        transaction (with the alarm), and those now waiting for a future slot do not run.
        """
        moves: list[tuple[int, RecurrenceSlot, bool, str]] = []
        for index, row in enumerate(rows):
            recurrence = loaded_recurrence(*row[7:12])
            if recurrence is None or int(row[4]) != 0:
                continue
            slot = RecurrenceSlot(int(row[2]), int(row[6]))
            target, runs = catch_up(recurrence, slot, now)
            if target != slot:
                moves.append((index, target, runs, random_uuid()))
        if not moves:
            return rows

        def write(sql: SqlStorage) -> list[bool]:
            return [
                move_to_slot(
                    sql,
                    rows[i][0],
                    rows[i][1],
                    "pending",
                    0,
                    generation,
                    slot,
                    now,
                    keep_error=True,
                )
                for i, slot, _, generation in moves
            ]

        written = await self._engine.transaction(write)
        kept: list[tuple[Any, ...] | None] = list(rows)
        for (index, slot, runs, generation), moved in zip(moves, written, strict=True):
            row = rows[index]
            if moved:
                self._moved(row[0], generation, slot, now)
            replaced = (
                row[0],
                generation,
                slot.at,
                now,
                0,
                row[5],
                slot.occurrence,
                *row[7:12],
                None,
                0,
            )
            kept[index] = replaced if moved and runs else None
        return [row for row in kept if row is not None]

    def advance(
        self,
        sql: SqlStorage,
        name: str,
        generation: str,
        recurrence: Recurrence,
        slot: RecurrenceSlot,
        status: str,
        attempt: int | None,
    ) -> bool:
        """Move a recurrence whose slot settled (succeeded, or `failed` for good) on to its
        next slot, or the one its catch-up policy picks when later slots are due too."""
        now = now_ms()
        following = next_slot(recurrence, slot)
        if following.at <= now:
            following, _ = catch_up(recurrence, following, now)
        new_generation = random_uuid()
        moved = move_to_slot(
            sql,
            name,
            generation,
            status,
            attempt,
            new_generation,
            following,
            now,
            keep_error=status == "failed",
        )
        if moved:
            self._moved(name, new_generation, following, now)
        return moved
