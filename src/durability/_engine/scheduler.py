"""`DurabilityScheduler` and its `Engine`: the one owner of an object's physical alarm.

An object has exactly one alarm. Helpers never touch it: they register participants
(a table and a due-work callback) and every write that adds or reschedules work goes
through `Engine.transaction`, which reconciles the alarm in the same storage
transaction. The alarm is a bounded fallback (never sooner than `alarm_min_delay_ms`
after a commit); an in-memory early timer starts near-term work at its exact time while
the instance lives. Everything in memory here (permits, timers, active keys, watchers)
is an optimisation over durable rows: after eviction the alarm rebuilds it all.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from .._clock import now_ms
from .._cloudflare import alarm_info, as_context
from .._context import Context, Row, SqlStorage, Storage, Transaction
from .._errors import DurabilityError, SerializedError, serialize_error
from .._signal import AbortSignal, abort
from .._validate import check_callable, check_int, check_positive_int, to_epoch_ms
from .lifecycle import Emit, create_emitter, logger, report_failure
from .migrations import Migration, is_schema_current, migrate
from .tables import TableSpec, pending_head, purge_created_before

T = TypeVar("T")
Item = TypeVar("Item")

DEFAULT_ALARM_CONCURRENCY = 10
DEFAULT_ALARM_MIN_DELAY_MS = 15_000
DEFAULT_ALARM_HANDOFF_MS = 840_000
MIN_ALARM_DELAY_MS = 1_000
MAX_ALARM_DELAY_MS = 15_000
MAX_TIMER_MS = 2**31 - 1
"""Timers further out than this are never set; only the physical alarm serves them."""

SCHEDULER_OPTIONS = frozenset(
    {"alarm_concurrency", "alarm_min_delay_ms", "alarm_handoff_ms", "live_timers", "on_alarm_retry"}
)

Release = Callable[[], None]
"""Gives a permit back (to the oldest waiter first); calling it twice is a no-op."""

SettlementListener = Callable[[Row | None], None]
"""Called after a watched record may have settled; gets the executed row on success."""


class AlarmInvocationInfo(Protocol):
    """What a host passes to `alarm(info)`: the platform's retry bookkeeping."""

    @property
    def retry_count(self) -> int: ...

    @property
    def is_retry(self) -> bool: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class AlarmRetryInfo:
    """What `on_alarm_retry` receives after a failed alarm pass armed its own retry.

    `retry_count` and `is_retry` come from the host's invocation info when it had one;
    `object_id` is the string form of `ctx.id` when the context has an id.
    """

    error: SerializedError
    retry_in_ms: int
    retry_count: int | None = None
    is_retry: bool | None = None
    object_id: str | None = None


@dataclass(eq=False, slots=True)
class Participant:
    """One table whose due work alarm passes run.

    `next_pending_at(sql)` replaces the default pending-time query for tables without
    `status`/`next_attempt_at`; `holding()` True means the participant serves its due
    work itself right now, so only the physical alarm (not the timer) counts it.
    """

    table: TableSpec
    run_due: Callable[[int, AlarmInvocationInfo | None], Awaitable[None]]
    next_pending_at: Callable[[SqlStorage], int | None] | None = None
    holding: Callable[[], bool] | None = None


@dataclass(eq=False, slots=True)
class ActiveExecution:
    """An attempt running in this instance: the key's in-memory lock.

    `settled` is set only when the outcome is persisted AND the handler task has ended.
    """

    generation: str
    created_at: int
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    signal: AbortSignal | None = None


class Engine:
    """The machinery behind a scheduler: transactions, alarm, permits, timers, watchers."""

    def __init__(self, context: Context, options: Mapping[str, Any]) -> None:
        """Validate the scheduler `options` given (see `DurabilityScheduler`); absent ones
        take their defaults."""
        on_alarm_retry = options.get("on_alarm_retry")
        if on_alarm_retry is not None:
            check_callable("on_alarm_retry", on_alarm_retry)
        self.alarm_concurrency = check_positive_int(
            "alarm_concurrency", options.get("alarm_concurrency", DEFAULT_ALARM_CONCURRENCY)
        )
        min_delay = check_int(
            "alarm_min_delay_ms", options.get("alarm_min_delay_ms", DEFAULT_ALARM_MIN_DELAY_MS)
        )
        if not MIN_ALARM_DELAY_MS <= min_delay <= MAX_ALARM_DELAY_MS:
            raise ValueError(
                f"alarm_min_delay_ms must be between {MIN_ALARM_DELAY_MS} and {MAX_ALARM_DELAY_MS}"
            )
        self.alarm_min_delay_ms = min_delay
        self.alarm_handoff_ms = check_positive_int(
            "alarm_handoff_ms", options.get("alarm_handoff_ms", DEFAULT_ALARM_HANDOFF_MS)
        )
        live_timers = options.get("live_timers", False)
        if not isinstance(live_timers, bool):
            raise TypeError(f"live_timers must be a bool, got {type(live_timers).__name__}")
        self.live_timers = live_timers
        self.context = context
        storage = getattr(context, "storage", None)
        if storage is None:
            raise TypeError("context must have a storage attribute (a Durable Object ctx)")
        self.storage: Storage = storage
        self.sql: SqlStorage = storage.sql
        self._wait_until: Callable[[Awaitable[Any]], None] | None = getattr(
            context, "wait_until", None
        )
        self._on_alarm_retry: Callable[[AlarmRetryInfo], Any] | None = on_alarm_retry
        self._kinds: set[str] = set()
        self._participants: list[Participant] = []
        self._migrated: set[str] = set()
        self._available = self.alarm_concurrency
        self._waiters: deque[asyncio.Future[Release]] = deque()
        self._refresh: asyncio.Future[None] | None = None
        self._early: tuple[int, asyncio.TimerHandle] | None = None
        self._pulling: dict[str, int] = {}
        self._owed: set[str] = set()
        self._watchers: dict[str, dict[str, set[SettlementListener]]] = {}
        self._active_keys: dict[str, set[str]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- attachment ---------------------------------------------------------------------

    def claim_kind(self, kind: str) -> None:
        """Reserve `kind` for one helper; a second helper of that kind raises `ValueError`."""
        if kind in self._kinds:
            raise ValueError(f"A {kind} helper is already attached to this scheduler")
        self._kinds.add(kind)

    def register(self, participant: Participant) -> None:
        """Make alarm passes run `participant`'s due work (one participant per table)."""
        if any(p.table.name == participant.table.name for p in self._participants):
            raise ValueError(
                f"A {participant.table.name} helper is already attached to this scheduler"
            )
        self._participants.append(participant)

    def migrate_schema(self, capability: str, migrations: Sequence[Migration]) -> None:
        """Bring `capability`'s tables to the latest version, once per engine."""
        if capability in self._migrated:
            return
        if not is_schema_current(self.sql, capability, migrations):
            migrate(self.storage, capability, migrations)
        self._migrated.add(capability)

    def object_id(self) -> str | None:
        """The string form of `context.id`, or `None` when the context has no id."""
        object_id = getattr(self.context, "id", None)
        return None if object_id is None else str(object_id)

    # -- background work ----------------------------------------------------------------

    def spawn(self, awaitable: Awaitable[T]) -> asyncio.Task[T]:
        """Run `awaitable` as a task of this object's instance.

        The task is handed to `context.wait_until` (when the host has it), so the host
        counts it as live work and cancels it on eviction; if the host refuses it (the
        instance is gone) the task is cancelled and the refusal raised.
        """
        task: asyncio.Task[T] = asyncio.ensure_future(awaitable)
        hook = self._wait_until
        if hook is None:
            # Nobody else holds the task: keep it from being garbage collected.
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return task
        try:
            hook(task)
        except BaseException:
            task.cancel()
            raise
        return task

    def wait_until(
        self,
        awaitable: Awaitable[Any],
        event: str = "durability.background_execution.failed",
        details: Mapping[str, Any] | None = None,
    ) -> None:
        """Keep `awaitable` running as instance work; a refusing host is reported as `event`."""
        try:
            self.spawn(awaitable)
        except Exception as error:
            report_failure(event, details or {}, error)

    def run_in_background(
        self, work: Awaitable[Any], event: str, details: Mapping[str, Any]
    ) -> None:
        """Run `work` detached; its failure is reported as `event` with `details`."""

        async def guarded() -> None:
            try:
                await work
            except Exception as error:
                report_failure(event, details, error)

        self.wait_until(guarded(), event, details)

    def emitter(self, hook: Callable[[Any], Any] | None) -> Emit:
        """Wrap a lifecycle hook: never raises, async hooks go to `wait_until`."""
        return create_emitter(hook, lambda awaitable: self.wait_until(awaitable))

    # -- transactions and the physical alarm --------------------------------------------

    def transaction_sync(self, write: Callable[[SqlStorage], T]) -> T:
        """Run synchronous writes atomically without touching the alarm."""
        return self.storage.transaction_sync(lambda: write(self.sql))

    async def transaction(
        self,
        write: Callable[[SqlStorage], T],
        *,
        due_at: Callable[[T], int | None] | None = None,
    ) -> T:
        """Run `write` and reconcile the alarm in one transaction; then publish the timer.

        `due_at(value)`, given the write's return value, is the due time of the pending
        row the write added (`None` if it added none): when that is now or earlier, the
        reconcile needs only the armed alarm, not the pending rows.
        """
        timer_at: list[int | None] = [None]

        async def body(txn: Transaction) -> T:
            value = write(self.sql)
            added = None if due_at is None else due_at(value)
            timer_at[0] = await self._reconcile(txn, added)
            return value

        result = await self.storage.transaction(body)
        self._schedule_early_alarm(timer_at[0])
        return result

    def schedule_next_alarm(self) -> Awaitable[None]:
        """A reconciliation-only transaction; concurrent calls share the one in flight."""
        if self._refresh is None:
            refresh = self.spawn(self.transaction(_no_write))
            self._refresh = refresh

            def clear(done: asyncio.Future[None]) -> None:
                if self._refresh is done:
                    self._refresh = None
                if not done.cancelled():
                    done.exception()

            refresh.add_done_callback(clear)
        return asyncio.shield(self._refresh)

    def _pending_times(self, participant: Participant) -> tuple[int | None, int | None]:
        """(earliest pending time for the alarm, earliest time for the in-memory timer)."""
        if participant.next_pending_at is not None:
            at = participant.next_pending_at(self.sql)
            if at is None:
                return None, None
            holding = participant.holding is not None and participant.holding()
            return at, None if holding else at
        active = self._active_keys.get(participant.table.name, set())
        limit = len(active) + 1 if self.live_timers else 1
        rows = pending_head(self.sql, participant.table, limit)
        if not rows:
            return None, None
        physical = rows[0][1]
        if not self.live_timers:
            return physical, physical
        eligible = next((at for key, at in rows if key not in active), None)
        return physical, eligible

    async def _reconcile(self, txn: Transaction, added_due_at: int | None = None) -> int | None:
        """Arm the alarm for the earliest pending row; return the early timer's time.

        `added_due_at` is the due time of a row this transaction added, if any.
        """
        now = now_ms()
        if added_due_at is not None and added_due_at <= now:
            current = await txn.get_alarm()
            latest = now + self.alarm_min_delay_ms
            # The earliest pending time is at most `added_due_at`, so the window is
            # [earliest, now + min delay]: an alarm in [added_due_at, latest] is inside
            # it, a missing or later one moves to `latest`. Only an alarm before
            # `added_due_at` needs the earliest pending time itself.
            if current is None or current > latest:
                await txn.set_alarm(latest)
                return added_due_at
            if current >= added_due_at:
                return added_due_at
        physical_times: list[int] = []
        timer_times: list[int] = []
        for participant in self._participants:
            physical, timer = self._pending_times(participant)
            if physical is not None:
                physical_times.append(physical)
            if timer is not None:
                timer_times.append(timer)
        current = await txn.get_alarm()
        if not physical_times:
            if current is not None:
                await txn.delete_alarm()
            return None
        earliest = min(physical_times)
        target = max(earliest, now + self.alarm_min_delay_ms)
        # An alarm already inside [earliest, target] stays, so frequent reconciliation
        # cannot keep pushing the fallback later.
        if current is None or current < earliest or current > target:
            await txn.set_alarm(target)
        return min(timer_times) if timer_times else None

    def _schedule_early_alarm(self, timestamp: int | None) -> None:
        now = now_ms()
        if self._early is not None:
            # Keep the same timer, or one already due (a new due one fires no sooner).
            armed = self._early[0]
            if armed == timestamp or (timestamp is not None and max(armed, timestamp) <= now):
                return
            self._early[1].cancel()
            self._early = None
        if timestamp is None:
            return
        delay = timestamp - now
        # Without live timers the physical alarm serves everything from the min delay on.
        if not self.live_timers and delay >= self.alarm_min_delay_ms:
            return
        if delay > MAX_TIMER_MS:
            return
        loop = asyncio.get_running_loop()
        handle = loop.call_later(max(delay, 0) / 1000, self._fire_early_alarm, timestamp)
        self._early = (timestamp, handle)

    def _fire_early_alarm(self, timestamp: int) -> None:
        if self._early is None or self._early[0] != timestamp:
            return
        self._early = None
        # A participant whose running pass still has due rows to start would mostly read
        # those same rows again: its part of this pass is deferred until that pass has
        # taken its last row (`run_concurrent`).
        busy = {name for name, count in self._pulling.items() if count}
        self._owed |= busy
        ready = [p for p in self._participants if p.table.name not in busy]
        if ready:
            self._start_early_pass(timestamp, ready)

    def _start_early_pass(self, timestamp: int, participants: list[Participant]) -> None:
        try:
            self.spawn(self._early_pass(timestamp, participants))
        except Exception:
            # The host refused new work: the instance is gone and the alarm takes over.
            logger.debug("early alarm at %s dropped: the instance is gone", timestamp)

    async def _early_pass(self, timestamp: int, participants: list[Participant]) -> None:
        try:
            await self._guarded_pass(None, participants)
        except Exception as error:
            report_failure(
                "durability.background_execution.failed", {"scheduled_time": timestamp}, error
            )

    # -- alarm passes -------------------------------------------------------------------

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        """Run every participant's due work; a failed pass arms its own retry and returns.

        Only when even the fallback `set_alarm` fails does the error reach the host,
        whose retries are limited (it drops the alarm after them).
        """
        await self._guarded_pass(info, self._participants)

    async def _guarded_pass(
        self, info: AlarmInvocationInfo | None, participants: list[Participant]
    ) -> None:
        try:
            await self._run_alarm(info, participants)
        except Exception as error:
            retry_at = now_ms() + self.alarm_min_delay_ms
            try:
                await self.storage.set_alarm(retry_at)
            except Exception:
                raise error from None
            report_failure(
                "durability.alarm.failed", {"retry_in_ms": self.alarm_min_delay_ms}, error
            )
            self._notify_alarm_retry(error, info)

    async def _run_alarm(
        self, info: AlarmInvocationInfo | None, participants: list[Participant]
    ) -> None:
        started_at = now_ms()
        work = asyncio.gather(*(self.spawn(p.run_due(started_at, info)) for p in participants))
        work.add_done_callback(_consume_exception)
        remaining = self.alarm_handoff_ms - (now_ms() - started_at)
        done, _ = await asyncio.wait({work}, timeout=max(remaining, 0) / 1000)
        if work not in done:
            # Hand off before the host's wall-time limit; the work keeps running here and
            # the next pass attaches to it through the active keys.
            await self._arm_for_handoff()
            return
        work.result()
        await self.schedule_next_alarm()

    async def _arm_for_handoff(self) -> None:
        async def arm(txn: Transaction) -> None:
            target = now_ms() + self.alarm_min_delay_ms
            current = await txn.get_alarm()
            if current is None or current > target:
                await txn.set_alarm(target)

        await self.storage.transaction(arm)

    def _notify_alarm_retry(self, failure: BaseException, info: AlarmInvocationInfo | None) -> None:
        hook = self._on_alarm_retry
        if hook is None:
            return
        details = {"retry_in_ms": self.alarm_min_delay_ms}
        retry = AlarmRetryInfo(
            error=serialize_error(failure),
            retry_in_ms=self.alarm_min_delay_ms,
            retry_count=None if info is None else getattr(info, "retry_count", None),
            is_retry=None if info is None else getattr(info, "is_retry", None),
            object_id=self.object_id(),
        )
        try:
            outcome = hook(retry)
        except Exception as error:
            report_failure("durability.alarm.retry_hook_failed", details, error)
            return
        if inspect.isawaitable(outcome):
            self.run_in_background(outcome, "durability.alarm.retry_hook_failed", details)

    # -- permits ------------------------------------------------------------------------

    def try_acquire_permit(self) -> Release | None:
        """A permit if one is free right now, else `None` (never waits)."""
        if self._available == 0:
            return None
        self._available -= 1
        return self._release_once()

    async def acquire_permit(self) -> Release:
        """Wait in FIFO order for a permit of the shared pool."""
        release = self.try_acquire_permit()
        if release is not None:
            return release
        waiter: asyncio.Future[Release] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                waiter.result()()
            raise

    def _release_once(self) -> Release:
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            while self._waiters:
                waiter = self._waiters.popleft()
                if not waiter.done():
                    waiter.set_result(self._release_once())
                    return
            self._available += 1

        return release

    async def run_concurrent(
        self,
        items: Iterable[Item],
        worker: Callable[[Item], Awaitable[None]],
        *,
        table: str | None = None,
    ) -> None:
        """Run `worker` over `items` in order with at most `alarm_concurrency` at once.

        `table` names the participant whose due rows these are: until the last item is
        taken, early-timer passes skip that participant, and one deferred that way
        starts as soon as it is taken.
        """
        pending = list(items)
        if not pending:
            return
        cursor = iter(pending)
        taken = 0
        pulling = table is not None

        def stop_pulling() -> None:
            nonlocal pulling
            if not pulling or table is None:
                return
            pulling = False
            self._pulling[table] -= 1
            if self._pulling[table] or table not in self._owed:
                return
            self._owed.discard(table)
            owed = [p for p in self._participants if p.table.name == table]
            self._start_early_pass(now_ms(), owed)

        async def pull() -> None:
            nonlocal taken
            for item in cursor:
                taken += 1
                if taken == len(pending):
                    # A deferred pass starts as a new task, after this last item started.
                    stop_pulling()
                await worker(item)

        if table is not None:
            self._pulling[table] = self._pulling.get(table, 0) + 1
        try:
            await asyncio.gather(
                *(pull() for _ in range(min(self.alarm_concurrency, len(pending))))
            )
        finally:
            stop_pulling()

    # -- active keys, watchers and purge ------------------------------------------------

    def track_active(self, table: str, key: str) -> None:
        """Mark `key` of `table` as executing in this instance."""
        self._active_keys.setdefault(table, set()).add(key)

    def release_active(self, table: str, key: str) -> None:
        """Unmark `key` of `table`."""
        keys = self._active_keys.get(table)
        if keys is None:
            return
        keys.discard(key)
        if not keys:
            del self._active_keys[table]

    def watch(self, table: str, key: str, listener: SettlementListener) -> Callable[[], None]:
        """Call `listener` when `key` settles or is purged; returns the unsubscribe function."""
        listeners = self._watchers.setdefault(table, {}).setdefault(key, set())
        listeners.add(listener)

        def unsubscribe() -> None:
            listeners.discard(listener)
            by_key = self._watchers.get(table)
            if not listeners and by_key is not None and by_key.get(key) is listeners:
                del by_key[key]
                if not by_key:
                    del self._watchers[table]

        return unsubscribe

    def watched(self, table: str, key: str) -> bool:
        """True when someone watches `key` of `table` (so a notification is worth building)."""
        by_key = self._watchers.get(table)
        return by_key is not None and key in by_key

    def notify(self, table: str, key: str, row: Row | None = None) -> None:
        """Tell the watchers of `key` that it may have settled (call only after commit)."""
        for listener in list(self._watchers.get(table, {}).get(key, ())):
            listener(row)

    async def purge(
        self,
        table: TableSpec,
        before: object,
        active: Mapping[str, ActiveExecution],
        abort_reason: str,
    ) -> int:
        """Delete rows created strictly before `before`, aborting their running attempts."""
        cutoff = to_epoch_ms("before", before)
        for execution in list(active.values()):
            if execution.created_at < cutoff and execution.signal is not None:
                abort(execution.signal, DurabilityError(abort_reason))
        removed = await self.transaction(lambda sql: purge_created_before(sql, table, cutoff))
        if removed:
            for key in list(self._watchers.get(table.name, {})):
                self.notify(table.name, key)
        return removed


def _no_write(sql: SqlStorage) -> None:
    """The write of a reconciliation-only transaction."""


def _consume_exception(future: asyncio.Future[Any]) -> None:
    """Mark a background future's exception as seen (the pass reports it if it waits)."""
    if not future.cancelled():
        future.exception()


class DurabilityScheduler:
    """One per object when several helpers share its alarm, storage and permits.

    Pass it as `scheduler=` to every helper and delegate the object's `alarm()` to
    `scheduler.alarm(info)`. Construct it, and every helper, eagerly in the object's
    `__init__`: only helpers built in the current instance are consulted by a pass.
    """

    __slots__ = ("_engine",)

    def __init__(
        self,
        *,
        context: Context,
        alarm_concurrency: int = DEFAULT_ALARM_CONCURRENCY,
        alarm_min_delay_ms: int = DEFAULT_ALARM_MIN_DELAY_MS,
        alarm_handoff_ms: int = DEFAULT_ALARM_HANDOFF_MS,
        live_timers: bool = False,
        on_alarm_retry: Callable[[AlarmRetryInfo], Any] | None = None,
    ) -> None:
        self._engine = Engine(
            as_context(context),
            {
                "alarm_concurrency": alarm_concurrency,
                "alarm_min_delay_ms": alarm_min_delay_ms,
                "alarm_handoff_ms": alarm_handoff_ms,
                "live_timers": live_timers,
                "on_alarm_retry": on_alarm_retry,
            },
        )

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        """Run due work of every attached helper and re-arm the physical alarm."""
        await self._engine.alarm(alarm_info(info))


def given_options(**options: Any) -> dict[str, Any]:
    """The scheduler options a helper was actually given (the ones not `None`)."""
    return {name: value for name, value in options.items() if value is not None}


def attach(
    *,
    scheduler: DurabilityScheduler | None,
    context: Context | None,
    kind: str,
    options: Mapping[str, Any],
) -> Engine:
    """The engine a helper of `kind` uses: the shared one of `scheduler`, or a private one.

    Exactly one of `scheduler` and `context` must be given; scheduler options are only
    accepted with `context`. Claims `kind` on the engine (one helper per kind).
    """
    unknown = sorted(set(options) - SCHEDULER_OPTIONS)
    if unknown:
        raise TypeError(f"unknown scheduler option {unknown[0]}")
    if scheduler is not None and context is not None:
        raise ValueError("pass either scheduler= or context=, not both")
    if scheduler is not None:
        if not isinstance(scheduler, DurabilityScheduler):
            raise TypeError(
                f"scheduler must be a DurabilityScheduler, got {type(scheduler).__name__}"
            )
        if options:
            name = sorted(options)[0]
            raise ValueError(f"{name} can only be given with context= (set it on the scheduler)")
        engine = scheduler._engine
    elif context is not None:
        engine = Engine(as_context(context), options)
    else:
        raise TypeError("either scheduler= or context= is required")
    engine.claim_kind(kind)
    return engine
