"""Reading armed alarms straight from object files, to rebuild the alarm catalog.

The objects' own alarm rows are authoritative; the catalog only saves opening every
object at start. When the catalog is missing, corrupt, or may be older than the
objects (they changed after its last clean close), the alarms are read back from the
object files themselves: all of them, or only those modified since that close.
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger("durability.runtime")

_OBJECT_FILE = re.compile(r"[0-9a-f]{64}\.sqlite3")
_OBJECT_NAME_LENGTH = 64 + len(".sqlite3")

Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class StoredAlarm:
    """What one object file says about its alarm: when to wake it (`None`: never)."""

    key: Key
    name: str | None
    wake_ms: int | None


def object_files(root: Path, modified_since_ns: int | None) -> Iterator[tuple[Key, Path]]:
    """Every object file under `root` (only those modified since the time, if given).

    A file counts as modified when it or its write-ahead log is; only directory
    entries are read for the others (one `stat` each), no database is opened.
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
