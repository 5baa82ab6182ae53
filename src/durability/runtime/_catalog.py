"""The runtime-wide alarm catalog: when each armed object's alarm is due, at the latest.

The catalog maps (namespace, id) to a time no later than the object's armed alarm, so
`start()` arms every object's timer without opening every object. It spans a second
database, and WAL gives no atomic commit across databases, so it is kept a superset:
an entry is written (durably) before an object commit that arms an earlier time, and
removed or raised only after the object's commit; a timer that finds nothing due on
the object is a harmless spurious wake.

The objects stay authoritative. The catalog records when it last agreed with every
object: at start, once checked, and at a clean close (from then on every object change
goes through it). At start, objects modified since that time (all of them when the
catalog is missing, corrupt, or has no such record) are read and the catalog
corrected from them, with a warning when it had missed an alarm. After a clean close
no object is opened, and no object file even looked at (its mark, `_recovery`); after
a crash, only those the crashed run modified are read; with a catalog restored from
an old copy, those modified since that copy. On the real clock, that scan runs in a
worker thread after `start()` returned (alarms it finds are armed then), and the
agreement is recorded only once it has ended.

An object whose file was created in this run is the exception: its alarm commits do
not wait for the catalog, whose entry follows with the settled ones. A crash before
that entry is written cannot lose the alarm: the file is newer than the agreement
recorded at this start, so the next start reads it. This holds only while the clock
has not gone back past that time, and only when the agreement was recorded at start
(not after a scan that ran late); otherwise the entry is written first, as for any
object.

Writes are batched across objects: one transaction writes every entry changed since
the last one. With a committer (the real clock), object commits write the entries they
need first from their worker thread, and settled entries are written there too; a lock
lets one writer at a time take every pending entry, so objects committing together
share a catalog fsync. Settled entries (a bound raised or dropped after the object's
commit) may wait: on the real clock they are written at most every `SETTLE_DELAY_S`,
so deliveries across many objects share one catalog commit.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path

from ._catalog_file import (
    Key,
    Row,
    load_catalog,
    record_agreement,
    set_aside,
    write_entries,
)
from ._recovery import (
    StoredAlarm,
    leave_clean_mark,
    object_files,
    read_alarm_file,
    take_clean_mark,
)

logger = logging.getLogger("durability.runtime")

AGREED_MARGIN_NS = 2_000_000_000
"""File times may lag the clock by a tick: objects modified this shortly before the
recorded time are read again at the next start."""

SETTLE_DELAY_S = 0.05
"""On the real clock, how long settled entries wait to be written with others."""


class Catalog:
    """Armed alarms by object: a lower bound of each one's wake time, and its name."""

    def __init__(self, file: Path | None) -> None:
        self._file = file
        self._connection: sqlite3.Connection | None = None
        self._entries: dict[Key, tuple[str | None, int]] = {}
        self._written: dict[Key, int] = {}
        """The wake bound the file holds for each key (what the last write left)."""
        self._dirty: set[Key] = set()
        self._flush_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._committer: Executor | None = None
        self._state = threading.Lock()
        """Guards `_entries` and `_dirty`, which writers in worker threads read."""
        self._writer = threading.Lock()
        """One writer of the catalog file at a time."""
        self._scan: concurrent.futures.Future[bool] | None = None
        self._closing = False
        self._agreed_ns: int | None = None
        """When this run recorded, at start, that the catalog agrees with every object."""
        self.found: Callable[[list[StoredAlarm]], None] | None = None
        """Told (on the loop) of alarms the scan after start found missing."""

    def open(self, loop: asyncio.AbstractEventLoop, committer: Executor | None = None) -> None:
        """Open the catalog file (if any), load its entries, correct them from the objects.

        `committer`: where settled entries are written (on the loop when `None`).
        """
        self._loop = loop
        self._committer = committer
        file = self._file
        if file is None:
            return
        problem = None if file.exists() else "missing"
        closed_clean_ns = take_clean_mark(file.parent) if file.parent.is_dir() else None
        agreed_ns: int | None = None
        try:
            connection, self._entries, agreed_ns = load_catalog(file)
        except sqlite3.OperationalError as error:
            # An I/O error or the like, not a damaged file: keep the file, name it.
            raise type(error)(f"alarm catalog {file}: {error}") from error
        except sqlite3.DatabaseError as error:
            problem = f"corrupt ({error})"
            set_aside(file)
            connection, self._entries, _ = load_catalog(file)
        self._written = {key: wake for key, (_, wake) in self._entries.items()}
        self._connection = connection
        if problem is not None:
            agreed_ns = None
            # A new path has no objects: nothing to rebuild, nothing to warn about.
            if not any(object_files(file.parent, None)):
                problem = None
        if problem is None and agreed_ns is not None and closed_clean_ns == agreed_ns:
            self._agreed_ns = record_agreement(connection)
        elif problem is None and agreed_ns is not None and committer is not None:
            # After a crash, on the real clock: start() does not wait for the scan.
            since = agreed_ns - AGREED_MARGIN_NS
            self._scan = committer.submit(self._scan_late, file.parent, since)
        else:
            self._reconcile(file.parent, agreed_ns, problem)
            self._agreed_ns = record_agreement(connection)

    def scan_finds_new_files(self) -> bool:
        """Whether an object file created now would be read by the start after a crash:
        it is newer than the agreement this run recorded at start (the clock did not go
        back). False while a late scan runs: its agreement, recorded when it ends, could
        be later than files created meanwhile."""
        return self._agreed_ns is not None and time.time_ns() >= self._agreed_ns

    def _reconcile(self, root: Path, agreed_ns: int | None, problem: str | None) -> None:
        """Correct the entries from the objects modified since `agreed_ns` (all if `None`)."""
        since = None if agreed_ns is None else agreed_ns - AGREED_MARGIN_NS
        read, missed = self._read_modified(root, since, may_drop=True)
        self.flush()
        if problem is not None:
            logger.warning(
                "alarm catalog %s was %s: rebuilt from the alarms stored in %d object file(s)",
                self._file,
                problem,
                read,
            )
        elif missed:
            _warn_missed(self._file, missed, "")

    def _scan_late(self, root: Path, since_ns: int) -> bool:
        """The scan of modified object files, in a worker thread after start() returned.

        It only adds or lowers entries (an object changed since start has told the
        catalog itself; a bound left too early is a spurious wake), and records the
        agreement once done. Whether it got to the end (`close()` may cut it short).
        """
        _, missed = self._read_modified(root, since_ns, may_drop=False)
        with self._writer:
            if self._closing or self._connection is None:
                return False
            self._flush(self._connection)
            record_agreement(self._connection)
        if missed:
            _warn_missed(self._file, missed, " after start")
            if self._loop is not None and self.found is not None:
                self._loop.call_soon_threadsafe(self.found, missed)
        return True

    def _read_modified(
        self, root: Path, since_ns: int | None, *, may_drop: bool
    ) -> tuple[int, list[StoredAlarm]]:
        """Read the objects modified since `since_ns` and correct their entries (stops
        early once closing); how many were read, and the alarms the catalog missed."""
        read = 0
        missed: list[StoredAlarm] = []
        for key, object_file in object_files(root, since_ns, lambda: self._closing):
            stored = read_alarm_file(key, object_file)
            read += 1
            if stored is not None and self._correct(stored, may_drop=may_drop):
                missed.append(stored)
        return read, missed

    def _correct(self, stored: StoredAlarm, *, may_drop: bool) -> bool:
        """Bring an entry in line with its object's stored alarm (an earlier time wins;
        none drops it if `may_drop`); whether the catalog had missed that alarm."""
        key = stored.key
        with self._state:
            current = self._entries.get(key)
            if stored.wake_ms is None:
                if current is not None and may_drop:
                    del self._entries[key]
                    self._dirty.add(key)
                return False
            if current is not None and current[1] <= stored.wake_ms:
                return False
            name = stored.name if stored.name is not None else (current or (None, 0))[0]
            self._entries[key] = (name, stored.wake_ms)
            self._dirty.add(key)
            return True

    def entries(self) -> list[tuple[Key, str | None, int]]:
        """Every entry: key, name and the wake lower bound."""
        return [(key, name, wake) for key, (name, wake) in self._entries.items()]

    def lower(self, key: Key, name: str | None, wake_ms: int) -> Callable[[], None] | None:
        """Make sure the entry is no later than `wake_ms`; the write that must be durable
        before the object's commit (`flush`), or `None` when the file has a bound no later
        (maybe of an alarm deleted since: arming again needs no write before the commit)."""
        with self._state:
            current = self._entries.get(key)
            if current is not None and current[1] <= wake_ms:
                if key not in self._dirty:
                    return None
            else:
                self._entries[key] = (name, wake_ms)
                self._dirty.add(key)
            written = self._written.get(key)
            if written is not None and written <= wake_ms:
                return None
        # A dirty entry may be one an earlier, failed flush left unwritten: write it now.
        return self.flush

    def settle(self, key: Key, name: str | None, wake_ms: int | None) -> None:
        """Record the committed wake time (or its absence); written on a later flush."""
        with self._state:
            if wake_ms is None:
                if key not in self._entries:
                    return
                del self._entries[key]
            else:
                self._entries[key] = (name, wake_ms)
            self._dirty.add(key)
        if not self._flush_scheduled and self._loop is not None:
            self._flush_scheduled = True
            if self._committer is None:
                self._loop.call_soon(self._flush_later)
            else:
                self._loop.call_later(SETTLE_DELAY_S, self._flush_later)

    def flush(self) -> None:
        """Write every changed entry in one transaction (from any thread)."""
        with self._writer:
            if self._connection is None:
                with self._state:
                    self._dirty.clear()
                return
            self._flush(self._connection)

    def _flush_later(self) -> None:
        self._flush_scheduled = False
        if self._connection is None:
            return
        if self._committer is None:
            self._flush_quietly()
        else:
            self._committer.submit(self._flush_quietly)

    def _flush_quietly(self) -> None:
        # Settled entries only raise or drop a bound: the catalog stays a superset while
        # they wait, so a failed write is retried by the next flush, not raised here.
        try:
            self.flush()
        except Exception as error:
            logger.warning("alarm catalog %s: write failed, retried later: %r", self._file, error)

    def _flush(self, connection: sqlite3.Connection) -> None:
        with self._state:
            if not self._dirty:
                return
            dirty, self._dirty = self._dirty, set()
            rows = [(key, self._entries.get(key)) for key in dirty]
            _while_writing(self._written, rows)
        try:
            write_entries(connection, rows)
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            with self._state:
                self._dirty |= dirty
            raise
        with self._state:
            self._written.update((key, entry[1]) for key, entry in rows if entry is not None)

    def close(self) -> None:
        """Flush, record the agreement, and close the file (closed even if that fails).

        Call it only once every object database is closed: the recorded time says no
        object changed after it without the catalog knowing. A scan still running
        after start is stopped, and then no agreement is recorded (the next start
        scans again).
        """
        self._closing = True
        scanned = True
        if self._scan is not None:
            try:
                scanned = self._scan.result()
            except Exception as error:
                logger.warning(
                    "alarm catalog %s: the scan after start failed: %r", self._file, error
                )
                scanned = False
        with self._writer:
            connection, self._connection = self._connection, None
            if connection is not None:
                try:
                    self._flush(connection)
                    agreed_ns = record_agreement(connection) if scanned else None
                finally:
                    connection.close()
                if agreed_ns is not None:
                    assert self._file is not None
                    leave_clean_mark(self._file.parent, agreed_ns)


def _while_writing(written: dict[Key, int], rows: list[Row]) -> None:
    """Until a write of `rows` ends the file holds the old bound or the new: `lower`
    counts on the later (on none if either is none)."""
    for key, entry in rows:
        before = written.get(key)
        if entry is None or before is None:
            written.pop(key, None)
        else:
            written[key] = max(before, entry[1])


def _warn_missed(file: Path | None, missed: list[StoredAlarm], when: str) -> None:
    logger.warning(
        "alarm catalog %s was older than %d object(s) (%s): their alarms were "
        "restored from the objects%s",
        file,
        len(missed),
        ", ".join(f"{stored.key[0]}:{stored.key[1]}" for stored in missed[:5]),
        when,
    )
