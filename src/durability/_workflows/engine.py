"""The workflows' one seam to the engine: every use of the scheduler's internals is here.

Workflows ask the engine for little: an instance row is a record of the scheduler's
(`status` = ``pending`` while it has work, due at `next_attempt_at`), and one attempt of
it is one run of the workflow's code until it ends or suspends, started by the engine's
`AttemptRunner` like every attempt (`runs.RunExecutor` is its executor). What a run
needs:

- `start(run_due)`: migrate the workflows' tables (the engine's migration runner) and
  have alarm passes call `run_due(now, info)` for the due instances;
- `transaction(write, due_at=...)`: writes that add or move due work, the alarm
  reconciled in the same transaction; `write(write)`: writes that add no work
  (`statement(write)`: one such statement, which needs no savepoint);
  `sync()`: wait until everything written is durable (before a step's side effect);
- `runner` and `running`: the engine's `AttemptRunner` and the instances running here
  (each holds its key, the lock the reconcile and the passes read, and a permit of the
  scheduler's shared pool); `reserve` takes the permits and keys of new instances that
  their create claims; `refresh(key)` re-arms the timer for what a run skipped;
- `in_background`: instance work (the host cancels it on eviction).

A suspended instance (asleep, waiting for an event, between step retries) holds no
key, no permit and no task: only its row, due at its wake time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from .._context import Context, SqlStorage, Storage, alarm_info
from .._engine import (
    LATEST,
    ActiveExecution,
    Attempt,
    AttemptRunner,
    DurabilityScheduler,
    Engine,
    HostAlarmInfo,
    MigrationResult,
    MigrationTarget,
    Participant,
    Reservation,
    SchedulerOptionArgs,
    as_context,
    attach,
    migrate,
)
from .schema import CAPABILITY, INSTANCES, WORKFLOW_MIGRATIONS

__all__ = [
    "LATEST",
    "DurabilityScheduler",
    "Engine",
    "HostAlarmInfo",
    "MigrationResult",
    "MigrationTarget",
    "Reservation",
    "SchedulerOptionArgs",
    "WorkflowEngine",
    "migrate_schema",
]

T = TypeVar("T")

KIND = "DurabilityWorkflows"

RunDue = Callable[[int, HostAlarmInfo | None], Awaitable[None]]


class WorkflowEngine:
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
    def live_timers(self) -> bool:
        """Whether the in-memory timer serves all due work (passes then skip running keys)."""
        return self.engine.options.live_timers

    @property
    def runner(self) -> AttemptRunner:
        """The engine's `AttemptRunner`, which starts every run."""
        return self.engine.runner

    def reserve(self, attempts: Sequence[Attempt], positions: Sequence[int]) -> Reservation:
        """Permits (those free now) and keys for new instances a write inserts claimed
        (each attempt's position in the write beside it)."""
        return self.engine.runner.reserve(attempts, positions, queue=False)

    @property
    def runs_alone(self) -> bool:
        """Whether every run holds every permit (a pool of one)."""
        return self.engine.permits.size == 1

    @property
    def running(self) -> Mapping[str, ActiveExecution]:
        """The instances running here now, by key (a live view)."""
        return self.engine.running.of(INSTANCES.name)

    def write(self, write: Callable[[SqlStorage], T]) -> T:
        """Run `write` atomically; it must not add or move due work."""
        return self.engine.transaction_sync(write)

    def statement(self, write: Callable[[SqlStorage], T]) -> T:
        """Run `write`, which makes at most one statement that writes (one statement is
        atomic by itself), in the turn's transaction; it must not add or move due work."""
        return write(self.engine.sql)

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

    def refresh(self, key: str) -> None:
        """Re-arm the timer for what it skipped while instance `key` ran here."""
        self.engine.refresh_in_background(
            "durability.scheduler.refresh_failed", {"table": INSTANCES.name, "key": key}
        )

    def emitter(self) -> Callable[[Any], None]:
        """The lifecycle emitter of a helper without a hook (workflows emit no events)."""
        return self.engine.tasks.emitter(None)

    def in_background(self, work: Awaitable[Any], event: str, details: Mapping[str, Any]) -> None:
        """Run `work` detached; its failure (or the host's refusal) is reported as `event`."""
        self.engine.tasks.run_in_background(work, event, details)

    def on_emptied(self, hook: Callable[[], object]) -> None:
        """Call `hook()` once `delete_all()` emptied the object (the tables are back)."""
        self.engine.on_emptied(hook)

    async def alarm(self, info: HostAlarmInfo | None) -> None:
        """Run an alarm pass of every helper on the scheduler."""
        await self.engine.alarm(alarm_info(info))


def migrate_schema(context: Context, target: MigrationTarget) -> MigrationResult:
    """Move the workflows' tables of the object of `context` to `target` (a Cloudflare
    ctx is adapted): `DurabilityWorkflows.migrate`."""
    storage: Storage = as_context(context).storage
    return migrate(storage, CAPABILITY, WORKFLOW_MIGRATIONS, target)
