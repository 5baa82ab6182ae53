"""Host alarm delivery: a wake time per armed object, single-flight `alarm()` calls, retries.

The object's own alarm row is authoritative; the runtime keeps, per object, the wake
time of its last committed row (or the catalog's lower bound before the object was
opened), in a heap ordered by time, and one loop timer for the earliest (so a runtime
with many armed objects starts without a timer each). When an object's time comes, its
row is read again:

- a due user alarm runs with `retry_count=0` (it replaces any pending retry);
- else a due retry runs with its stored attempt number.

As `alarm()` starts, the user alarm is cleared and the next retry is stored as a
fallback, in the transaction of `alarm()`'s own first writes (one commit, not two): a
crash before that commit leaves the alarm as it was, due, and one after it leaves the
retry, so either way it runs again after a restart (at least once). After
the call: on success the retry is cleared; on failure it is re-stored with backoff from
now (2 s, 4 s, ... up to 6 retries, then dropped) unless `set_alarm` was called during
the run, which replaces it. Each failed call is logged with what happens next
(`_alarm_log`).

When a delivery itself fails (the object cannot be opened, or its bookkeeping write
does not commit), the object still holds its due alarm: the driver looks again after
the same backoff (2 s, 4 s, ... capped at the sixth delay), for as long as it fails.
"""

from __future__ import annotations

import asyncio
import heapq
import inspect
import logging
import weakref
from collections.abc import Callable, Coroutine
from types import FunctionType
from typing import Any, Protocol

from ._alarm_log import alarm_failed
from ._alarm_row import MAX_ALARM_RETRIES, AlarmRow, read_alarm, retry_delay_ms, write_alarm
from ._catalog import Catalog
from ._catalog_file import Key
from ._database import Database, FlushHook
from ._errors import ObjectEvictedError
from ._faults import Faults
from ._ids import ObjectId
from ._instance import Instance
from ._object import DurableObject
from ._platform import Platform
from ._recovery import StoredAlarm

logger = logging.getLogger("durability.runtime")


class AlarmHost(Protocol):
    """What the driver needs from the runtime."""

    platform: Platform
    faults: Faults | None

    def now_ms(self) -> int: ...

    def instance_for_alarm(self, key: Key, name: str | None) -> Instance | None: ...

    def run(
        self, instance: Instance, invoke: Callable[[DurableObject], object]
    ) -> Coroutine[Any, Any, object]: ...


_COMPACT_SLACK = 64
"""Outdated heap entries tolerated beyond one per armed object before the heap is rebuilt."""


class AlarmDriver:
    """Keeps the armed objects' wake times and delivers each alarm when it comes due."""

    def __init__(self, host: AlarmHost, catalog: Catalog) -> None:
        self._host = host
        self._catalog = catalog
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: dict[Key, int] = {}
        self._names: dict[Key, str | None] = {}
        self._queue: list[tuple[int, int, Key]] = []
        """(wake time, order of arming, key); an entry whose time is no longer the key's
        wake time is outdated and skipped."""
        self._armed = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        self._running: dict[Key, asyncio.Task[None]] = {}
        self._failures: dict[Key, int] = {}
        self._closed = False
        catalog.found = self._learn

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Queue every catalog entry (overdue ones fire right away)."""
        self._loop = loop
        for key, name, wake_ms in self._catalog.entries():
            self._names[key] = name
            self._wake[key] = wake_ms
        self._rebuild()

    def _learn(self, found: list[StoredAlarm]) -> None:
        """Arm alarms found after start in objects the catalog had missed."""
        for stored in found:
            assert stored.wake_ms is not None
            current = self._wake.get(stored.key)
            if current is None or stored.wake_ms < current:
                self._wake[stored.key] = stored.wake_ms
                self._names.setdefault(stored.key, stored.name)
                if stored.key not in self._running:
                    self._arm(stored.key)

    def holds(self, key: Key) -> bool:
        """Whether the object's alarm is queued or being delivered."""
        return key in self._wake or key in self._running

    def name_of(self, key: Key) -> str | None:
        """The name recorded for an object that has had an alarm, if any."""
        return self._names.get(key)

    def close(self) -> list[asyncio.Task[None]]:
        """Stop every timer and delivery; the deliveries to await are returned."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = self._timer_at = None
        self._queue.clear()
        tasks = list(self._running.values())
        for task in tasks:
            task.cancel()
        return tasks

    def prepare_commit(
        self, key: Key, name: str | None, database: Database
    ) -> tuple[FlushHook | None, int | None]:
        """Before object `key` commits an alarm change: the catalog write that must be
        durable first (lowering its entry to the new wake time), if any, and the wake
        time `committed` gets."""
        row = read_alarm(database)
        wake_ms = row.wake_ms if row is not None else None
        if wake_ms is None or (database.created and self._catalog.scan_finds_new_files()):
            # A file created in this run is read at the next start after a crash: its
            # entry need not precede the commit, it is written once settled.
            return None, wake_ms
        return self._catalog.lower(key, name, wake_ms), wake_ms

    def committed(self, key: Key, name: str | None, wake_ms: object) -> None:
        """Object `key`'s alarm change (to `wake_ms`) is durable: settle its catalog entry
        and queue its wake time."""
        assert wake_ms is None or isinstance(wake_ms, int)
        self._catalog.settle(key, name, wake_ms)
        if wake_ms is None:
            self._wake.pop(key, None)
            self._names.pop(key, None)
        else:
            self._names[key] = name
            self._wake[key] = self._late(key, wake_ms)
        if key not in self._running:
            self._arm(key)

    def _late(self, key: Key, wake_ms: int) -> int:
        """When to wake the object for an alarm due at `wake_ms`: then, or later by what
        the runtime's `Faults.alarm_delay_ms` answers."""
        faults = self._host.faults
        if faults is None:
            return wake_ms
        delay = faults.alarm_delay_ms(ObjectId(key[0], key[1], self._names.get(key)), wake_ms)
        if isinstance(delay, bool) or not isinstance(delay, int) or delay < 0:
            raise ValueError(f"Faults.alarm_delay_ms must answer an int >= 0, got {delay!r}")
        return wake_ms + delay

    def _arm(self, key: Key) -> None:
        """Queue the object's wake time (if it has one) and keep the timer on the earliest."""
        wake_ms = self._wake.get(key)
        if wake_ms is None or self._closed or self._loop is None:
            return
        self._armed += 1
        heapq.heappush(self._queue, (wake_ms, self._armed, key))
        if len(self._queue) > 2 * len(self._wake) + _COMPACT_SLACK:
            self._rebuild()
        elif self._timer_at is None or wake_ms < self._timer_at:
            self._set_timer()

    def _rebuild(self) -> None:
        """The queue anew from the wake times alone (dropping outdated entries)."""
        self._queue = [
            (wake_ms, order, key) for order, (key, wake_ms) in enumerate(self._wake.items())
        ]
        self._armed = len(self._queue)
        heapq.heapify(self._queue)
        self._set_timer()

    def _set_timer(self) -> None:
        """Point the one loop timer at the earliest queued time (none when empty)."""
        queue = self._queue
        while queue and self._wake.get(queue[0][2]) != queue[0][0]:
            heapq.heappop(queue)
        at = queue[0][0] if queue and not self._closed else None
        if at == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = at
        if at is not None and self._loop is not None:
            delay = max(0, at - self._host.now_ms()) / 1000
            self._timer = self._loop.call_later(delay, self._fire_due)

    def _fire_due(self) -> None:
        """The timer: start the delivery of every object whose time has come."""
        target = self._timer_at if self._timer_at is not None else 0
        self._timer = self._timer_at = None
        limit = max(target, self._host.now_ms())
        queue = self._queue
        while queue and queue[0][0] <= limit:
            wake_ms, _, key = heapq.heappop(queue)
            if self._wake.get(key) == wake_ms:
                self._fire(key)
        self._set_timer()

    def _fire(self, key: Key) -> None:
        if key in self._running or self._closed or self._loop is None:
            return
        self._running[key] = self._loop.create_task(self._deliver(key))

    async def _deliver(self, key: Key) -> None:
        try:
            await self._deliver_due(key)
            self._failures.pop(key, None)
        except ObjectEvictedError:
            pass
        except Exception as error:
            failures = self._failures.get(key, 0) + 1
            self._failures[key] = failures
            delay = retry_delay_ms(min(failures, MAX_ALARM_RETRIES))
            logger.warning(
                "alarm delivery to %s:%s failed (%r); looking again in %d ms", *key, error, delay
            )
            self._wake[key] = self._host.now_ms() + delay
        finally:
            del self._running[key]
            self._arm(key)

    async def _deliver_due(self, key: Key) -> None:
        instance = self._host.instance_for_alarm(key, self._names.get(key))
        if instance is None:
            logger.warning("alarm of %s:%s skipped: no class is bound as %r", *key, key[0])
            self._wake.pop(key, None)
            return
        database = instance.database
        now = self._host.now_ms()
        row = read_alarm(database)
        if row is None or row.wake_ms is None:
            self._wake.pop(key, None)
            self._catalog.settle(key, self._names.pop(key, None), None)
            return
        if row.scheduled_ms is not None:
            if row.scheduled_ms > now:
                if row.retry_ms is not None:
                    await _durable(database, write_alarm(database, AlarmRow(row.scheduled_ms)))
                self._wake[key] = self._late(key, row.scheduled_ms)
                return
            attempt = 0
        else:
            assert row.retry_ms is not None
            if row.retry_ms > now:
                self._wake[key] = self._late(key, row.retry_ms)
                return
            attempt = row.retry_attempt
        retry_row = self._retry_row(attempt, now)
        info = self._host.platform.alarm_info(attempt, attempt > 0)
        started = False

        def invoke(obj: DurableObject) -> object:
            nonlocal started
            started = True
            write_alarm(database, retry_row)
            return _call_alarm(obj, info)

        failure: BaseException | None = None
        try:
            await self._host.run(instance, invoke)
        except ObjectEvictedError as error:
            if instance.gone:
                return
            failure = error
        except Exception as error:
            failure = error
        if instance.gone:
            if failure is not None:
                # Dropped on a failed commit: the stored retry was lost with it.
                raise failure
            return
        if not started:
            # The object could not be built: the due alarm still counts as this attempt.
            write_alarm(database, retry_row)
        after = read_alarm(database)
        scheduled_ms = after.scheduled_ms if after is not None else None
        if failure is None:
            await _durable(database, write_alarm(database, AlarmRow(scheduled_ms)))
            return
        retry = None if scheduled_ms is not None else self._retry_row(attempt, self._host.now_ms())
        await _durable(
            database, write_alarm(database, retry if retry is not None else AlarmRow(scheduled_ms))
        )
        alarm_failed(
            key,
            instance.id.name or self._names.get(key),
            attempt,
            failure,
            retry_in_ms=None if retry is None else retry_delay_ms(attempt + 1),
            replaced=scheduled_ms is not None,
        )

    @staticmethod
    def _retry_row(attempt: int, now: int) -> AlarmRow | None:
        """The retry after call number `attempt` fails, or `None` once retries run out."""
        if attempt >= MAX_ALARM_RETRIES:
            return None
        return AlarmRow(None, now + retry_delay_ms(attempt + 1), attempt + 1)


async def _durable(database: Database, commit: asyncio.Future[None]) -> None:
    """Wait for `commit` of `database` (its sync waits for no later commits). The commit
    is shared with every call that joined it: a delivery cancelled while waiting (the
    runtime closing) must not cancel it, or those calls' results would be released (and
    the commit settled) as if it had ended."""
    database.pipeline.syncs.hurry()
    await asyncio.shield(commit)


def _call_alarm(obj: DurableObject, info: object) -> object:
    handler = getattr(obj, "alarm", None)
    if handler is None:
        return None
    function = getattr(handler, "__func__", None)
    takes = None if type(function) is not FunctionType else _METHOD_TAKES_ARGUMENT.get(function)
    if takes is None:
        takes = _takes_argument(handler)
        if type(function) is FunctionType:
            _METHOD_TAKES_ARGUMENT[function] = takes
    return handler(info) if takes else handler()


_METHOD_TAKES_ARGUMENT: weakref.WeakKeyDictionary[Callable[..., object], bool] = (
    weakref.WeakKeyDictionary()
)
"""Whether an `alarm` method takes the invocation info, by its function: a signature
is read once per class, not at every delivery."""


def _takes_argument(handler: Callable[..., object]) -> bool:
    try:
        parameters = inspect.signature(handler).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in parameters
    )
