"""The fanout's one seam to the engine: attachment, transactions, the runner, background work.

Every other fanout module goes through `FanoutEngine`, so a change in the engine's
shape touches this file only. Fanout registers one participant whose pending time
comes from two indexed queries (the deliveries table has no index the default
pending-time query could use).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from .._clock import now_ms
from .._context import Context, SqlStorage, alarm_info
from .._engine import (
    ActiveExecution,
    AttemptRunner,
    DurabilityScheduler,
    Participant,
    TableSpec,
    TurnBatch,
    as_context,
    attach,
    value_rows,
)
from .._engine import (
    HostAlarmInfo as HostInfo,
)
from .schema import FANOUT_MIGRATIONS

T = TypeVar("T")

__all__ = [
    "CAPABILITY",
    "DELIVERIES",
    "FanoutEngine",
    "HostInfo",
    "TurnBatch",
    "migrate_storage",
    "next_pending_at",
    "value_rows",
]

CAPABILITY = "fanout"
KIND = "DurabilityFanout"
DELIVERIES = TableSpec("durability_fanout_deliveries", "id")

NEXT_PENDING_QUERY = (
    "SELECT next_attempt_at FROM durability_fanout_deliveries "
    "WHERE phase = ? ORDER BY next_attempt_at LIMIT 1"
)
"""The earliest `next_attempt_at` of one phase (binding: the phase)."""


def next_pending_at(sql: SqlStorage) -> int | None:
    """The earliest `next_attempt_at` of any delivery row, either phase (index-served)."""
    times: list[int] = []
    for phase in ("delivery", "dead_letter"):
        rows = sql.exec(NEXT_PENDING_QUERY, phase).raw()
        times.extend(int(row[0]) for row in rows)
    return min(times) if times else None


class FanoutEngine:
    """The engine operations a fanout uses, and nothing else."""

    __slots__ = ("_engine", "_holding")

    def __init__(
        self,
        *,
        scheduler: DurabilityScheduler | None,
        context: Context | None,
        options: Mapping[str, Any],
    ) -> None:
        self._engine = attach(scheduler=scheduler, context=context, kind=KIND, options=options)
        self._holding: Callable[[], bool] = _never

    def start(
        self,
        run_due: Callable[[int, HostInfo | None], Awaitable[None]],
        holding: Callable[[], bool],
    ) -> None:
        """Migrate the fanout tables and make alarm passes call `run_due(now, info)`.

        `holding()` True means a pass now would only wait for runs already in flight:
        the early timer then leaves the fanout's due rows to the end of those runs.
        """
        self._engine.migrate_schema(CAPABILITY, FANOUT_MIGRATIONS)
        self._holding = holding
        self._engine.register(
            Participant(DELIVERIES, run_due, next_pending_at=next_pending_at, holding=holding)
        )

    @property
    def sql(self) -> SqlStorage:
        """The object's SQL storage (reads, and writes that add no pending work)."""
        return self._engine.sql

    async def transaction(self, write: Callable[[SqlStorage], T], *, due_now: bool = False) -> T:
        """Run `write` and reconcile the one physical alarm atomically.

        `due_now` says the write added a row that is due at once (the cheap reconcile;
        while the fanout is holding, it leaves the in-memory timer alone).
        """
        if due_now:
            return await self._engine.transaction(write, due_at=_due_now, timed=not self._holding())
        return await self._engine.transaction(write)

    def removal(self, write: Callable[[SqlStorage], T]) -> T:
        """Run `write`, which only deletes pending rows, atomically without reconciling.

        Removing work never needs an earlier alarm, and every removal happens inside a
        delivery pass, whose end reconciles the alarm and the timer anyway.
        """
        return self._engine.transaction_sync(write)

    async def sync(self) -> None:
        """Wait until every write made so far is durable (raises if their commit failed)."""
        await self._engine.storage.sync()

    def nested(self, write: Callable[[SqlStorage], T]) -> T:
        """Run `write` atomically inside the transaction running now (a savepoint)."""
        return self._engine.transaction_sync(write)

    @property
    def runner(self) -> AttemptRunner:
        """The engine's `AttemptRunner`, which runs every target's attempts."""
        return self._engine.runner

    @property
    def running(self) -> Mapping[str, ActiveExecution]:
        """The targets whose attempt runs here now, by id (a live view)."""
        return self._engine.running.of(DELIVERIES.name)

    def spawn(self, work: Awaitable[T]) -> asyncio.Task[T]:
        """Run `work` as a task of this instance (counted by the host, cancelled on eviction)."""
        return self._engine.tasks.spawn(work)

    def in_background(self, work: Awaitable[Any], event: str, details: Mapping[str, Any]) -> None:
        """Run `work` detached; a failure is reported as `event`."""
        self._engine.tasks.run_in_background(work, event, details)

    def schedule_next_alarm(self) -> Awaitable[None]:
        """Reconcile the alarm (and the in-memory timer) with the pending rows."""
        return self._engine.schedule_next_alarm()

    def on_emptied(self, hook: Callable[[], object]) -> None:
        """Call `hook()` once `delete_all()` has emptied the object (tables recreated)."""
        self._engine.on_emptied(hook)

    def emitter(self, hook: Callable[[Any], Any] | None) -> Callable[[Any], None]:
        """A lifecycle emitter that never raises; async hooks go to `wait_until`."""
        return self._engine.tasks.emitter(hook)

    async def alarm(self, info: HostInfo | None) -> None:
        """Run an alarm pass of every helper on this scheduler."""
        await self._engine.alarm(alarm_info(info))


def _never() -> bool:
    """`holding()` before `start`: nothing is in flight."""
    return False


def _due_now(value: object) -> int:
    """The due time of a row added due at once: now."""
    return now_ms()


def migrate_storage(context: Context) -> Any:
    """The storage `DurabilityFanout.migrate` works on (a Cloudflare ctx is adapted)."""
    return as_context(context).storage
