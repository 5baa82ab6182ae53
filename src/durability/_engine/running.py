"""What runs in this instance, and who waits for a record to settle.

`RunningExecutions` is the one record of the attempts running here, per table and key:
an execution registers itself before it waits for a permit and leaves only when its
outcome is persisted and its handler has ended, so it doubles as the key's in-memory
lock. Alarm passes read it to attach to running work instead of starting it again, and
the reconcile reads it to keep the early timer off keys that are busy. `Watchers` wakes
waiters when a record settles. Both are in memory only: after eviction the durable rows
are the truth and the next alarm pass rebuilds what runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping
from types import MappingProxyType
from typing import TypeVar

from .._context import Row
from .._errors import DurabilityError
from .._signal import AbortSignal, abort

_NONE: Mapping[str, object] = MappingProxyType({})

T = TypeVar("T")

SettlementListener = Callable[[Row | None], None]
"""Called after a watched record may have settled; gets the executed row on success."""


class ActiveExecution:
    """An attempt running in this instance: the key's in-memory lock.

    It is settled only when the outcome is persisted AND the handler task has ended. The
    event waiters await is made only when one asks for it (most attempts have none).
    Its one kind is `attempt.Attempt`, which has the `generation` and `created_at` these
    read, holds the attempt's permit too and sets these fields itself (one object per
    attempt, built without a call to a base `__init__`).
    """

    __slots__ = ("_event", "is_settled", "signal")

    generation: str
    created_at: int
    signal: AbortSignal | None
    """The attempt's signal, from its claim on (`None` before)."""
    is_settled: bool
    _event: asyncio.Event | None

    @property
    def settled(self) -> asyncio.Event:
        """An event set once the execution has settled."""
        event = self._event
        if event is None:
            event = self._event = asyncio.Event()
            if self.is_settled:
                event.set()
        return event

    def settle(self) -> None:
        """Mark the execution settled and wake whoever waits on `settled`."""
        self.is_settled = True
        if self._event is not None:
            self._event.set()


class RunningExecutions:
    """The executions running in this instance, by table and key (at most one per key)."""

    __slots__ = ("_tables",)

    def __init__(self) -> None:
        self._tables: dict[str, dict[str, ActiveExecution]] = {}

    def table(self, table: str) -> dict[str, ActiveExecution]:
        """`table`'s running executions by key, live: whoever holds an attempt registers
        it here (`key in` it tells what runs; `finish` unregisters)."""
        found = self._tables.get(table)
        if found is None:
            found = self._tables[table] = {}
        return found

    def of(self, table: str) -> Mapping[str, ActiveExecution]:
        """A live read-only view of `table`'s running executions, by key."""
        return MappingProxyType(self.table(table))

    def keys(self, table: str) -> Collection[str]:
        """The keys of `table` running now (a live collection, not a copy)."""
        return self._tables.get(table, _NONE)

    def finish(self, table: str, key: str, execution: ActiveExecution) -> None:
        """Mark `execution` settled and unregister it, unless a newer one took its key."""
        execution.settle()
        running = self._tables.get(table)
        if running is not None and running.get(key) is execution:
            del running[key]

    def abort_created_before(self, table: str, cutoff: int, reason: str) -> None:
        """Abort, with a `DurabilityError(reason)`, the handlers of `table`'s records
        created strictly before `cutoff`."""
        for execution in list(self.table(table).values()):
            if execution.created_at < cutoff and execution.signal is not None:
                abort(execution.signal, DurabilityError(reason))

    def abort_all(self, reason: str) -> None:
        """Abort, with a `DurabilityError(reason)`, the handler of every execution here."""
        for running in list(self._tables.values()):
            for execution in list(running.values()):
                if execution.signal is not None:
                    abort(execution.signal, DurabilityError(reason))


class Watchers:
    """Listeners waiting for records to settle, by table and key."""

    __slots__ = ("_tables",)

    def __init__(self) -> None:
        self._tables: dict[str, dict[str, set[SettlementListener]]] = {}

    def watch(self, table: str, key: str, listener: SettlementListener) -> Callable[[], None]:
        """Call `listener` when `key` settles or is purged; returns the unsubscribe function."""
        listeners = self._tables.setdefault(table, {}).setdefault(key, set())
        listeners.add(listener)

        def unsubscribe() -> None:
            listeners.discard(listener)
            by_key = self._tables.get(table)
            if not listeners and by_key is not None and by_key.get(key) is listeners:
                del by_key[key]
                if not by_key:
                    del self._tables[table]

        return unsubscribe

    async def settled(
        self,
        table: str,
        key: str,
        timeout_s: float,
        digest: Callable[[Row], T | None] | None = None,
    ) -> T | None:
        """Return once `key` of `table` settles or is purged, or after `timeout_s`. Only a
        settlement after this call is seen: the caller reads the row before it. With
        `digest`, what it makes of the row the settlement was told with, at that moment
        (`None` after a purge, a timeout, or when it makes nothing or raises)."""
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[T | None] = loop.create_future()

        def wake(row: Row | None = None) -> None:
            if woken.done():
                return
            made = None
            if digest is not None and row is not None:
                try:
                    made = digest(row)
                except Exception:
                    made = None  # the caller reads the row again
            woken.set_result(made)

        unsubscribe = self.watch(table, key, wake)
        timer = loop.call_later(timeout_s, wake)
        try:
            return await woken
        finally:
            timer.cancel()
            unsubscribe()

    def watched_keys(self, table: str) -> Collection[str]:
        """The keys of `table` someone watches (a live view; empty when none)."""
        return self._tables.get(table, _NONE)

    def watched(self, table: str, key: str) -> bool:
        """True when someone watches `key` of `table` (so a notification is worth building)."""
        by_key = self._tables.get(table)
        return by_key is not None and key in by_key

    def notify(self, table: str, key: str, row: Row | None = None) -> None:
        """Tell the watchers of `key` that it may have settled (call only after commit)."""
        for listener in list(self._tables.get(table, {}).get(key, ())):
            listener(row)

    def notify_all(self, table: str) -> None:
        """Tell every watcher of `table` (after a purge removed rows)."""
        for key in list(self._tables.get(table, {})):
            self.notify(table, key)

    def notify_everyone(self) -> None:
        """Tell every watcher of every table (after the object was emptied)."""
        for table in list(self._tables):
            self.notify_all(table)
