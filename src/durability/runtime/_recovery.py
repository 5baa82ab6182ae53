"""Reading armed alarms straight from object files, to rebuild the alarm catalog.

The objects' own alarm rows are authoritative; the catalog only saves opening every
object at start. When the catalog is missing, corrupt, or may be older than the
objects (they changed after its last clean close), the alarms are read back from the
object files themselves: all of them, or only those modified since that close.

A clean close also leaves a mark (`<path>/.clean`) holding the time the catalog
recorded; the next start takes it away (durably, before any object can change) and,
when it matches the catalog and no namespace directory changed since, skips even the
scan for modified files. After a crash there is no mark, so the scan runs.
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .._files import sync_directory

logger = logging.getLogger("durability.runtime")

CLEAN_MARK = ".clean"

_OBJECT_FILE = re.compile(r"[0-9a-f]{64}\.sqlite3")
_OBJECT_NAME_LENGTH = 64 + len(".sqlite3")

Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class StoredAlarm:
    """What one object file says about its alarm: when to wake it (`None`: never)."""

    key: Key
    name: str | None
    wake_ms: int | None


def leave_clean_mark(root: Path, agreed_ns: int) -> None:
    """Note that no object changed after `agreed_ns` (call after a clean close).

    Not synced: a mark lost to a power cut only costs the next start a scan, and one
    that survives was written after the catalog's own (synced) record of that time.
    """
    (root / CLEAN_MARK).write_text(str(agreed_ns))


def take_clean_mark(root: Path) -> int | None:
    """The time of the last clean close, if no directory changed since its mark was
    left. Call it before opening anything under `root`; the mark is removed durably
    either way, so a crash from now on leaves none."""
    mark = root / CLEAN_MARK
    try:
        marked_ns = mark.stat().st_mtime_ns
        text = mark.read_text()
    except FileNotFoundError:
        return None
    except OSError as error:
        logger.warning("clean-close mark %s cannot be read: %r", mark, error)
        marked_ns, text = 0, ""
    unchanged = all(changed_ns <= marked_ns for changed_ns in _directory_times(root))
    mark.unlink()
    sync_directory(root)
    return int(text) if unchanged and text.isdigit() else None


def _directory_times(root: Path) -> Iterator[int]:
    """When the root and each namespace directory last changed (a file added, removed,
    renamed, or a write-ahead log created, as any SQLite write does)."""
    yield root.stat().st_mtime_ns
    with os.scandir(root) as listing:
        for entry in listing:
            if entry.name.isidentifier() and entry.is_dir():
                yield entry.stat().st_mtime_ns


def object_files(
    root: Path, modified_since_ns: int | None, stop: Callable[[], bool] = lambda: False
) -> Iterator[tuple[Key, Path]]:
    """Every object file under `root` (only those modified since the time, if given).

    A file counts as modified when it or its write-ahead log is; only directory
    entries are read for the others (one `stat` each), no database is opened. Ends
    early once `stop()` says so.
    """
    if not root.is_dir():
        return
    with os.scandir(root) as listing:
        namespaces = sorted(
            (entry.name, entry.path)
            for entry in listing
            if entry.name.isidentifier() and entry.is_dir()
        )
    for namespace, directory in namespaces:
        with os.scandir(directory) as listing:
            entries = {entry.name: entry for entry in listing}
        found = []
        for name, entry in entries.items():
            if len(name) != _OBJECT_NAME_LENGTH or not _OBJECT_FILE.fullmatch(name):
                continue
            if stop():
                return
            if modified_since_ns is not None:
                wal = entries.get(name + "-wal")
                try:
                    modified_ns = entry.stat().st_mtime_ns
                    if wal is not None:
                        modified_ns = max(modified_ns, wal.stat().st_mtime_ns)
                except FileNotFoundError:
                    continue
                if modified_ns < modified_since_ns:
                    continue
            found.append(name)
        for name in sorted(found):
            if stop():
                return
            yield (namespace, name[:64]), Path(directory, name)


def read_alarm_file(key: Key, file: Path) -> StoredAlarm | None:
    """The alarm stored in one object file; `None` (and a warning) if it cannot be read."""
    try:
        connection = sqlite3.connect(file, isolation_level=None)
    except sqlite3.Error as error:
        logger.warning("object %s:%s (%s) cannot be read: %r", *key, file, error)
        return None
    try:
        tables = {
            name
            for (name,) in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
                " AND name IN ('_durability_alarm', '_durability_name')"
            )
        }
        wake_ms = None
        if "_durability_alarm" in tables:
            for scheduled_ms, retry_ms in connection.execute(
                "SELECT scheduled_ms, retry_ms FROM _durability_alarm WHERE id = 1"
            ):
                times = [t for t in (scheduled_ms, retry_ms) if t is not None]
                wake_ms = min(times) if times else None
        name = None
        if "_durability_name" in tables:
            for (stored,) in connection.execute("SELECT name FROM _durability_name WHERE id = 1"):
                name = stored
        return StoredAlarm(key, name, wake_ms)
    except sqlite3.Error as error:
        logger.warning("object %s:%s (%s) cannot be read: %r", *key, file, error)
        return None
    finally:
        connection.close()
