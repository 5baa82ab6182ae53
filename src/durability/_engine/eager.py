"""Records claimed in the transaction that writes them: one commit makes a new record
and its first claim durable together.

Before the transaction, each record due now takes a permit that is free right now (so it
never goes ahead of a waiter: a released permit goes to the oldest waiter first) and
marks its key running, as an eager start does. The transaction claims, right after
writing them, those it inserted; their handlers run once its commit is durable, exactly
as a batch runs the rows it claimed. A record written but not claimed (the claim
statement failed) is claimed after the commit the ordinary way; one not written gives
its permit and key back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable

from .._clock import now_ms
from .._signal import AbortSignal
from .batch import Slot, at_once, claim_and_run, release, run_claimed, run_started
from .engine import Engine
from .spec import ExecutionSpec
from .tables import claim_attempts


class EagerClaims:
    """The records of one write that start with it: reserved, claimed, then run."""

    __slots__ = ("_claimed", "_engine", "_slots", "_started_at", "all_claimed")

    def __init__(self, engine: Engine, specs: Iterable[ExecutionSpec]) -> None:
        """Reserve a permit and the key of each spec (new records, due now) while permits
        are free; keys running here already, and repeats, are left out."""
        self._engine = engine
        self._slots: dict[str, Slot] = {}
        self._claimed: set[str] | None = set()
        """The keys the transaction claimed; `None` when its claim statement failed."""
        self._started_at = 0
        self.all_claimed = False
        """Whether `claim` claimed every record the transaction wrote (none needs a timer)."""
        running = engine.running
        for spec in specs:
            name = spec.table.name
            if spec.key in self._slots or spec.key in running.keys(name) or spec.after is not None:
                continue
            permit = engine.permits.try_acquire()
            if permit is None:
                break
            entry = running.start(name, spec.key, spec.generation, spec.created_at)
            self._slots[spec.key] = Slot(spec, entry, permit)

    def __bool__(self) -> bool:
        return bool(self._slots)

    def __contains__(self, key: object) -> bool:
        return key in self._slots

    def claim(self, written: Iterable[str]) -> None:
        """In the transaction that inserted the records `written`: claim the first attempt
        of each one reserved (a failed claim statement leaves them to `start`)."""
        keys = list(written)
        slots = [self._slots[key] for key in keys if key in self._slots]
        self._claimed = set()
        self.all_claimed = False
        rows = [
            (slot.spec.key, slot.spec.generation, slot.spec.attempt)
            for slot in slots
            if slot.spec.attempt < slot.spec.policy.max_attempts
        ]
        if not rows:
            return
        table = slots[0].spec.table
        now = now_ms()
        try:
            claimed = at_once(
                self._engine, len(rows), lambda sql: claim_attempts(sql, table, rows, now)
            )
        except Exception:
            self._claimed = None
            return
        self._started_at = now
        self._claimed = claimed
        self.all_claimed = len(claimed) == len(keys)
        for key in claimed:
            self._slots[key].entry.signal = AbortSignal()

    def start(self, written: Iterable[str]) -> Awaitable[None] | None:
        """After the commit is durable: the run of the claimed records (the awaitable),
        or `None` when there is none; every other reservation is given back now."""
        claimed = self._claimed
        wanted = set(written) if claimed is None else claimed
        slots: list[Slot] = []
        for key, slot in self._slots.items():
            if key in wanted:
                slots.append(slot)
            else:
                release(self._engine, slot)
        self._slots = {}
        if not slots:
            return None
        engine, started_at = self._engine, self._started_at
        waiting: list[asyncio.Task[None]] = []
        if claimed is None:
            return run_started(
                engine, slots, waiting, lambda: claim_and_run(engine, slots, waiting)
            )
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
