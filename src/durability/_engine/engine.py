"""`Engine`: the one owner of an object's physical alarm, behind `DurabilityScheduler`.

An object has exactly one alarm. Helpers never touch it: they register participants
(a table and a due-work callback) and every write that adds or reschedules work goes
through `Engine.transaction`, which reconciles the alarm in the same storage
transaction. The alarm is a bounded fallback (never sooner than `alarm_min_delay_ms`
after a commit); the early timer starts near-term work at its exact time while the
instance lives. Everything in memory here (permits, the timer, running executions,
watchers) is an optimisation over durable rows: after eviction the alarm rebuilds it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

from .._context import Context, SqlStorage, Storage, Transaction
from .lifecycle import report_failure
from .migrations import Migration, has_history, is_schema_current, migrate
from .options import SchedulerOptions
from .participants import HostAlarmInfo, Participant
from .passes import EnginePasses
from .permits import PermitPool
from .reconcile import TimerTimes, reconcile
from .runner import AttemptRunner
from .running import RunningExecutions, Watchers
from .tables import TableSpec, purge_created_before
from .tasks import InstanceTasks
from .timer import EarlyTimer

T = TypeVar("T")

_UNKNOWN = object()
"""The object id before its first use (the context's id does not change)."""


class Engine:
    """The machinery behind a scheduler: transactions, the alarm and its passes.

    Its parts are public for the helpers: `tasks` (instance work), `permits` (the
    shared pool), `running` (executions running here), `watchers` (settlement
    waiters) and `runner` (the one way attempts start).
    """

    def __init__(self, context: Context, options: SchedulerOptions) -> None:
        self.options = options
        self.context = context
        storage = getattr(context, "storage", None)
        if storage is None:
            raise TypeError("context must have a storage attribute (a Durable Object ctx)")
        self.storage: Storage = storage
        self.sql: SqlStorage = storage.sql
        self.tasks = InstanceTasks(context)
        self.permits = PermitPool(options.alarm_concurrency)
        self.running = RunningExecutions()
        self.watchers = Watchers()
        self.runner = AttemptRunner(self)
        self.passes = EnginePasses(self)
        self._timer = EarlyTimer(options, self.passes.start_early)
        self._kinds: set[str] = set()
        self.participants: list[Participant] = []
        """The tables whose due work passes run (one helper each)."""
        self._migrated: dict[str, Sequence[Migration]] = {}
        self._emptied: list[Callable[[], object]] = []
        self._emptied_count = 0
        """How many times `delete_all()` emptied the object under this engine."""
        self._refresh: asyncio.Future[None] | None = None
        self._object_id: object = _UNKNOWN
        self.handle: object = None
        """The `DurabilityScheduler` of this engine: helpers hold the engine, and through
        it the object's registered scheduler stays alive as long as they do."""
        storage.on_delete_all(self._storage_emptied)

    # -- attachment ---------------------------------------------------------------------

    def claim_kind(self, kind: str) -> None:
        """Reserve `kind` for one helper; a second helper of that kind raises `ValueError`."""
        if kind in self._kinds:
            raise ValueError(f"A {kind} helper is already attached to this scheduler")
        self._kinds.add(kind)

    def register(self, participant: Participant) -> None:
        """Make alarm passes run `participant`'s due work (one participant per table)."""
        if any(p.table.name == participant.table.name for p in self.participants):
            raise ValueError(
                f"A {participant.table.name} helper is already attached to this scheduler"
            )
        self.participants.append(participant)

    def migrate_schema(self, capability: str, migrations: Sequence[Migration]) -> None:
        """Bring `capability`'s tables to the latest version, once per engine (and again
        after `delete_all()` dropped them)."""
        if capability in self._migrated:
            return
        if not is_schema_current(self.sql, capability, migrations):
            migrate(self.storage, capability, migrations)
        self._migrated[capability] = migrations

    def on_emptied(self, hook: Callable[[], object]) -> None:
        """Call `hook()` after `delete_all()` emptied the object, once the tables are back:
        for a helper's in-memory copy of what its rows held."""
        self._emptied.append(hook)

    def recreated_if_emptied(self) -> bool:
        """After a wipe this engine was not told of (Cloudflare's own `deleteAll()`):
        whether the migration history was gone though this engine migrated (a user's
        downgrade keeps it); if so the tables are back, as `_storage_emptied` leaves
        them."""
        if not self._migrated:
            return False
        try:
            if has_history(self.sql):
                return False
            self._storage_emptied()
        except Exception:
            return False  # the storage itself fails: the pass's retry alarm follows
        return True

    def _storage_emptied(self) -> None:
        """`delete_all()` dropped every row and the alarm: recreate the tables the helpers
        use, as a new instance would, and drop what memory holds about the old rows (the
        timer, the handlers running them, the waiters), so nothing brings them back. If a
        table cannot be made, it raises with memory untouched."""
        schemas = dict(self._migrated)
        self._migrated.clear()
        try:
            for capability, migrations in schemas.items():
                self.migrate_schema(capability, migrations)
        except BaseException:
            self._migrated = schemas
            raise
        self._emptied_count += 1
        self._timer.stop()
        self.running.abort_all("the object's storage was deleted (delete_all)")
        for hook in self._emptied:
            hook()
        self.watchers.notify_everyone()

    def object_id(self) -> str | None:
        """The string form of `context.id`, or `None` when the context has no id."""
        if self._object_id is _UNKNOWN:
            object_id = getattr(self.context, "id", None)
            self._object_id = None if object_id is None else str(object_id)
        return cast("str | None", self._object_id)

    # -- transactions and the physical alarm --------------------------------------------

    def transaction_sync(self, write: Callable[[SqlStorage], T]) -> T:
        """Run synchronous writes atomically without touching the alarm."""
        return self.storage.transaction_sync(lambda: write(self.sql))

    async def transaction(
        self,
        write: Callable[[SqlStorage], T],
        *,
        due_at: Callable[[T], int | None] | None = None,
        timed: bool | Callable[[T], bool] = True,
    ) -> T:
        """Run `write` and reconcile the alarm in one transaction; then publish the timer.

        `due_at(value)`, given the write's return value, is the due time of the pending
        row the write added (`None` if it added none): when that is now or earlier, the
        reconcile needs only the armed alarm, not the pending rows. `timed` False (or
        `timed(value)` False): the row needs no timer (its participant is holding, or
        the write claimed it already), so that shortcut leaves the timer alone.
        """
        times: list[TimerTimes | None] = [None]

        async def body(txn: Transaction) -> T:
            value = write(self.sql)
            added = None if due_at is None else due_at(value)
            serving = self._timer.serving()
            wanted = timed(value) if callable(timed) else timed
            times[0] = await reconcile(
                txn,
                self.sql,
                self.participants,
                self.running,
                self.options,
                serving,
                added,
                wanted,
            )
            return value

        result = await self.storage.transaction(body)
        if times[0] is not None:
            self._timer.schedule(times[0])
        return result

    def schedule_next_alarm(self) -> Awaitable[None]:
        """A reconciliation-only transaction; concurrent calls share the one in flight."""
        return asyncio.shield(self._refreshing())

    async def reconcile_now(self) -> None:
        """`schedule_next_alarm` begun in the caller's turn when none is in flight, so it
        joins the commit of the writes the caller just made instead of following it."""
        if self._refresh is not None:
            await asyncio.shield(self._refresh)
            return
        await self.transaction(_no_write)

    def refresh_in_background(self, event: str, details: Mapping[str, Any]) -> None:
        """`schedule_next_alarm` not awaited: it joins the refresh in flight without a task
        of its own; its failure (or the host's refusal) is reported as `event`."""
        try:
            refresh = self._refreshing()
        except Exception as refusal:
            report_failure(event, details, refusal)
            return

        def report(done: asyncio.Future[None]) -> None:
            if not done.cancelled() and (error := done.exception()) is not None:
                report_failure(event, details, error)

        refresh.add_done_callback(report)

    def _refreshing(self) -> asyncio.Future[None]:
        """The shared reconciliation task, started if none is in flight (raises the
        host's refusal)."""
        if self._refresh is None:
            refresh = self.tasks.spawn(self.transaction(_no_write))
            self._refresh = refresh

            def clear(done: asyncio.Future[None]) -> None:
                if self._refresh is done:
                    self._refresh = None
                if not done.cancelled():
                    done.exception()

            refresh.add_done_callback(clear)
        return self._refresh

    # -- alarm passes -------------------------------------------------------------------

    async def alarm(self, info: HostAlarmInfo | None = None) -> None:
        """Run every participant's due work; a failed pass arms its own retry and returns.

        Only when even the fallback `set_alarm` fails does the error reach the host,
        whose retries are limited (it drops the alarm after them).
        """
        await self.passes.run(info, self.participants)

    @property
    def emptied_count(self) -> int:
        """How many times `delete_all()` emptied the object under this engine."""
        return self._emptied_count

    # -- due rows and purge -------------------------------------------------------------

    def pulling(self, table: str) -> Callable[[], None]:
        """Mark a pass over `table`'s due rows as still taking them; returns its `done()`.

        Until `done()`, the early timer is neither armed for that participant's work nor
        starts passes over it; a pass owed to it meanwhile starts at `done()`.
        """
        return self._timer.pulling(table)

    async def purge(self, table: TableSpec, cutoff: int, abort_reason: str) -> int:
        """Delete rows created strictly before `cutoff`, aborting their running attempts."""
        self.running.abort_created_before(table.name, cutoff, abort_reason)
        removed = await self.transaction(lambda sql: purge_created_before(sql, table, cutoff))
        if removed:
            self.watchers.notify_all(table.name)
        return removed


def _no_write(sql: SqlStorage) -> None:
    """The write of a reconciliation-only transaction."""
