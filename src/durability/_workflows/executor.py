"""The workflows' one seam to the engine: every use of the scheduler's internals is here.

Workflows ask the engine for little: an instance row is a record of the scheduler's
(`status` = ``pending`` while it has work, due at `next_attempt_at`), and one attempt of
it is one run of the workflow's code until it ends or suspends. What a run needs:

- `start(run_due)`: migrate the workflows' tables (the engine's migration runner) and
  have alarm passes call `run_due(now, info)` for the due instances;
- `transaction(write, due_at=...)`: writes that add or move due work, the alarm
  reconciled in the same transaction; `write(write)`: writes that add no work;
  `sync()`: wait until everything written is durable (before a step's side effect);
- `Slot`s: `hold(key, ...)` marks an instance running here (the key lock the reconcile
  and the passes read) before its run waits for a permit; `Slot.permit()` takes one
  permit of the scheduler's shared pool; `release(slot)` gives both back and re-arms
  the timer for the key;
- `spawn` / `in_background`: instance tasks (the host cancels them on eviction).

A suspended instance (asleep, waiting for an event, between step retries) holds no
slot, no permit and no task: only its row, due at its wake time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any, TypeVar

from .._context import Context, SqlStorage, Storage, alarm_info
from .._engine import (
    LATEST,
    ActiveExecution,
    DurabilityScheduler,
    HostAlarmInfo,
    MigrationResult,
    MigrationTarget,
    Participant,
    Release,
    SchedulerOptionArgs,
    as_context,
    attach,
    migrate,
    report_failure,
)
from .schema import CAPABILITY, INSTANCES, WORKFLOW_MIGRATIONS

__all__ = [
    "LATEST",
    "DurabilityScheduler",
    "HostAlarmInfo",
    "MigrationResult",
    "MigrationTarget",
    "SchedulerOptionArgs",
    "Slot",
    "WorkflowExecutor",
    "migrate_schema",
    "report",
]

T = TypeVar("T")

KIND = "DurabilityWorkflows"

RunDue = Callable[[int, HostAlarmInfo | None], Awaitable[None]]


class Slot:
    """An instance running here: its key lock, and its permit once taken."""

    __slots__ = ("_executor", "entry", "key", "permit_release")

    def __init__(self, executor: WorkflowExecutor, key: str, entry: ActiveExecution) -> None:
        self._executor = executor
        self.key = key
        self.entry = entry
        self.permit_release: Release | None = None

    async def permit(self) -> None:
        """Wait (FIFO) for a permit of the scheduler's shared pool."""
        if self.permit_release is None:
            permits = self._executor.engine.permits
            self.permit_release = permits.try_acquire() or await permits.acquire()

    @property
    def settled(self) -> asyncio.Event:
        """Set once the slot is released."""
        return self.entry.settled


class WorkflowExecutor:
    """What the workflows use of one object's engine, and nothing else."""

    __slots__ = ("engine",)

    def __init__(
        self,
        *,
        scheduler: DurabilityScheduler | None,
        context: Context | None,
        options: Mapping[str, Any],
    ) -> None:
        self.engine = attach(scheduler=scheduler, context=context, kind=KIND, options=options)

    def start(self, run_due: RunDue) -> None:
        """Bring the tables to the latest schema; alarm passes call `run_due(now, info)`."""
        self.engine.migrate_schema(CAPABILITY, WORKFLOW_MIGRATIONS)
        self.engine.register(Participant(INSTANCES, run_due))

    @property
    def sql(self) -> SqlStorage:
        """The object's SQL (reads, and statements that add no due work)."""
        return self.engine.sql

    @property
    def storage(self) -> Storage:
        """The object's storage."""
        return self.engine.storage

    @property
    def live_timers(self) -> bool:
        """Whether the in-memory timer serves all due work (passes then skip running keys)."""
        return self.engine.options.live_timers

    def object_id(self) -> str | None:
        """The object's id as a string, when the host gives one."""
        return self.engine.object_id()

    def write(self, write: Callable[[SqlStorage], T]) -> T:
        """Run `write` atomically; it must not add or move due work."""
        return self.engine.transaction_sync(write)

    async def transaction(
        self,
        write: Callable[[SqlStorage], T],
        *,
        due_at: Callable[[T], int | None] | None = None,
        timed: bool = True,
    ) -> T:
        """Run `write` and reconcile the alarm in one transaction.

        `due_at(value)` is the due time of the row the write made due (`None`: none),
        which lets the reconcile skip reading the pending rows when that is now; `timed`
        False says that row is held here already, so the timer must not fire for it.
        """
        return await self.engine.transaction(write, due_at=due_at, timed=timed)

    async def sync(self) -> None:
        """Wait until every write so far is durable (raises if its commit failed)."""
        await self.engine.storage.sync()

    def running(self) -> Collection[str]:
        """The instance keys held here now (a live view)."""
        return self.engine.running.keys(INSTANCES.name)

    def held(self, key: str) -> Slot | None:
        """The slot of `key` if it is held here."""
        entry = self.engine.running.of(INSTANCES.name).get(key)
        return None if entry is None else Slot(self, key, entry)

    def hold(self, key: str, generation: str, created_at: int) -> Slot:
        """Mark instance `key` as running here (the caller checked it is not)."""
        entry = self.engine.running.start(INSTANCES.name, key, generation, created_at)
        return Slot(self, key, entry)

    def release(self, slot: Slot, *, refresh: bool) -> None:
        """Give back the slot's permit and key lock; with `refresh`, re-arm the timer for
        what it skipped while held (a run cut short leaves that to the alarm)."""
        if slot.permit_release is not None:
            slot.permit_release()
            slot.permit_release = None
        self.engine.running.finish(INSTANCES.name, slot.key, slot.entry)
        if refresh:
            self.engine.refresh_in_background(
                "durability.scheduler.refresh_failed", {"table": INSTANCES.name, "key": slot.key}
            )

    def spawn(self, work: Awaitable[T]) -> asyncio.Task[T]:
        """Run `work` as a task of the instance (the host cancels it on eviction)."""
        return self.engine.tasks.spawn(work)

    def in_background(self, work: Awaitable[Any], event: str, details: Mapping[str, Any]) -> None:
        """Run `work` detached; its failure (or the host's refusal) is reported as `event`."""
        self.engine.tasks.run_in_background(work, event, details)

    def on_emptied(self, hook: Callable[[], object]) -> None:
        """Call `hook()` once `delete_all()` emptied the object (the tables are back)."""
        self.engine.on_emptied(hook)

    async def alarm(self, info: HostAlarmInfo | None) -> None:
        """Run an alarm pass of every helper on the scheduler."""
        await self.engine.alarm(alarm_info(info))


def report(event: str, details: Mapping[str, Any], error: BaseException) -> None:
    """Log a failure nobody awaits (the engine's reporting)."""
    report_failure(event, details, error)


def migrate_schema(context: Context, target: MigrationTarget) -> MigrationResult:
    """Move the workflows' tables of the object of `context` to `target` (a Cloudflare
    ctx is adapted): `DurabilityWorkflows.migrate`."""
    storage: Storage = as_context(context).storage
    return migrate(storage, CAPABILITY, WORKFLOW_MIGRATIONS, target)
