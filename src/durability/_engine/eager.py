"""Records claimed by the insert that writes them: one commit makes a new record and its
first claim durable together.

Before the transaction, each record due now takes a permit that is free right now (so it
never goes ahead of a waiter: a released permit goes to the oldest waiter first) and
marks its key running, as an eager start does. The transaction inserts those records
with their first attempt already claimed (`attempt = 1`, the row a claim would leave);
their handlers run once its commit is durable, exactly as a batch runs the rows it
claimed. A reservation whose record was not inserted gives its permit and key back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Collection, Iterable, Sequence
from collections.abc import Set as AbstractSet

from .._clock import now_ms
from .._signal import AbortSignal
from .batch import Slot, release, run_claimed, run_started
from .engine import Engine
from .spec import ExecutionSpec


class EagerClaims:
    """The records of one write that start with it: reserved, claimed, then run."""

    __slots__ = ("_claimed", "_engine", "_positions", "_slots", "_started_at", "all_claimed")

    def __init__(self, engine: Engine, specs: Iterable[tuple[int, ExecutionSpec]]) -> None:
        """Reserve a permit and the key of each spec (new records, due now, each given
        with its position in the write's rows) while permits are free; keys running here
        already, and repeats, are left out.

        A spec must be of the first row of its key in the write: a later row of that key
        could not be inserted, so an earlier one keeps its place."""
        self._engine = engine
        self._slots: dict[str, Slot] = {}
        self._positions: set[int] = set()
        self._claimed: set[str] = set()
        """The keys the transaction inserted claimed."""
        self._started_at = 0
        self.all_claimed = False
        """Whether every record the transaction inserted was inserted claimed (none needs a
        timer)."""
        running = engine.running
        slots = self._slots
        name: str | None = None
        busy: Collection[str] = ()
        for position, spec in specs:
            if spec.table.name != name:
                name = spec.table.name
                busy = running.keys(name)
            # `busy` may predate the first key started here: those are in `slots`.
            if spec.key in slots or spec.key in busy or spec.after is not None:
                continue
            permit = engine.permits.try_acquire()
            if permit is None:
                break
            entry = running.start(name, spec.key, spec.generation, spec.created_at)
            slots[spec.key] = Slot(spec, entry, permit)
            self._positions.add(position)

    def __bool__(self) -> bool:
        return bool(self._slots)

    def __contains__(self, key: object) -> bool:
        return key in self._slots

    def first_attempts(self) -> AbstractSet[int]:
        """The positions, in the write's rows, of the records to insert claimed (the
        reserved ones)."""
        return self._positions

    def claimed(self, keys: Sequence[str], written: int) -> None:
        """In the transaction: records `keys` were inserted claimed, of `written` inserted
        in all (any other one needs the timer)."""
        self._started_at = now_ms()
        self._claimed = set(keys)
        self.all_claimed = len(keys) == written
        for key in keys:
            self._slots[key].entry.signal = AbortSignal()

    def start(self) -> Awaitable[None] | None:
        """After the commit is durable: the run of the claimed records (the awaitable),
        or `None` when there is none; every other reservation is given back now."""
        claimed = self._claimed
        slots: list[Slot] = []
        for key, slot in self._slots.items():
            if key in claimed:
                slots.append(slot)
            else:
                release(self._engine, slot)
        self._slots = {}
        if not slots:
            return None
        engine, started_at = self._engine, self._started_at
        waiting: list[asyncio.Task[None]] = []
        return run_started(
            engine, slots, waiting, lambda: run_claimed(engine, slots, started_at, waiting)
        )

    def release(self) -> None:
        """The write failed or was abandoned: give every permit and key back (a record it
        may have committed is left to the timer and the alarm)."""
        slots = list(self._slots.values())
        self._slots = {}
        for slot in slots:
            release(self._engine, slot)
        if slots and self._engine.options.live_timers:
            self._engine.refresh_in_background(
                "durability.scheduler.refresh_failed", {"table": slots[0].spec.table.name}
            )
