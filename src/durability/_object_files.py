"""Find the object files of a runtime directory and open them read-only.

A runtime keeps `<path>/<NAMESPACE>/<64-hex id>.sqlite3` per object, beside its lock
file and alarm catalog. Opening with SQLite's `mode=ro` never changes the data (SQLite
may create a file's `-wal`/`-shm` side files), and WAL lets it read a consistent
snapshot while the runtime that owns the path keeps committing. `inspect`, `check`,
the dashboard and the simulation's view of stored objects all read through it.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

_OBJECT_FILE = re.compile(r"[0-9a-f]{64}\.sqlite3")
_RUNTIME_MARKERS = (".lock", "_catalog.sqlite3")


class InspectError(Exception):
    """The path is not something `inspect` can read (missing, or not a runtime's)."""


@dataclass(frozen=True, slots=True)
class ObjectFile:
    """One object's database file: its namespace, id and location."""

    namespace: str
    id: str
    file: Path


def find_objects(path: Path, namespace: str | None = None) -> list[ObjectFile]:
    """Every object file under `path` (only `namespace`'s, if given), sorted.

    Raises `InspectError` when `path` is missing, is not a directory, holds no runtime
    data, or lacks `namespace`.
    """
    if not path.exists():
        raise InspectError(f"{path}: no such directory")
    if not path.is_dir():
        raise InspectError(f"{path}: not a directory (expected a runtime's --path)")
    namespaces = {
        entry.name: entry
        for entry in path.iterdir()
        if entry.is_dir() and any(_OBJECT_FILE.fullmatch(f.name) for f in entry.iterdir())
    }
    if not namespaces and not any((path / marker).exists() for marker in _RUNTIME_MARKERS):
        raise InspectError(f"{path}: not a durability runtime directory (no objects found)")
    if namespace is not None:
        if namespace not in namespaces:
            known = ", ".join(sorted(namespaces)) or "none"
            raise InspectError(f"{path}: no objects in namespace {namespace!r} (found: {known})")
        namespaces = {namespace: namespaces[namespace]}
    return [
        ObjectFile(name, file.name.removesuffix(".sqlite3"), file)
        for name, directory in sorted(namespaces.items())
        for file in sorted(directory.iterdir())
        if _OBJECT_FILE.fullmatch(file.name)
    ]


def open_read_only(file: Path) -> sqlite3.Connection:
    """A connection that can only read `file` (and never creates it)."""
    connection = sqlite3.connect(
        f"{file.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None
    )
    connection.execute("PRAGMA query_only = ON")
    return connection
