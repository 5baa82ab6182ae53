"""One report per object: identity, file, alarm, then every capability's section."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from ..._object_files import InspectError, ObjectFile, find_objects, open_read_only
from ...runtime._ids import id_from_name
from .sections import SECTIONS
from .tables import Tables

ObjectReport = dict[str, Any]
"""`namespace`, `name`, `id`, `file`, `size_bytes`, `alarm_at`, then one key per section
(`operations`, `operation_details`, `named_alarms`, `log`, `fanout`, `workflows`), or
`error` when the file could not be read."""


def inspect_path(
    path: str | Path, namespace: str | None = None, name: str | None = None
) -> list[ObjectReport]:
    """Reports for the objects under `path`, optionally one namespace or one object.

    `name` is the object's name or its 64-hex id. Raises `InspectError` for a path that
    is not a runtime directory, an unknown namespace or an object that is not there.
    """
    objects = find_objects(Path(path), namespace)
    if name is not None:
        if namespace is None:
            raise InspectError("a NAME needs its NAMESPACE")
        wanted = {name, str(id_from_name(namespace, name))}
        objects = [found for found in objects if found.id in wanted]
        if not objects:
            raise InspectError(f"{path}: no object {name!r} in namespace {namespace!r}")
    return [read_object(found) for found in objects]


def read_object(found: ObjectFile) -> ObjectReport:
    """The report of one object file, read in one snapshot."""
    report: ObjectReport = {
        "namespace": found.namespace,
        "name": None,
        "id": found.id,
        "file": str(found.file),
        "size_bytes": _size(found.file),
        "alarm_at": None,
    }
    try:
        connection = open_read_only(found.file)
        try:
            connection.execute("BEGIN")
            tables = Tables(connection)
            report["name"] = _name(tables)
            report["alarm_at"] = _alarm_at(tables)
            for key, reader in SECTIONS:
                report[key] = reader(tables)
        finally:
            connection.close()
    except sqlite3.Error as error:
        report["error"] = f"cannot read {found.file.name}: {error}"
    return report


def _size(file: Path) -> int:
    """Bytes on disk: the database and its write-ahead log."""
    wal = file.with_name(file.name + "-wal")
    return sum(part.stat().st_size for part in (file, wal) if part.exists())


def _name(tables: Tables) -> str | None:
    if not tables.has("_durability_name"):
        return None
    rows = tables.rows("SELECT name FROM _durability_name WHERE id = 1")
    return str(rows[0]["name"]) if rows else None


def _alarm_at(tables: Tables) -> int | None:
    """When the runtime wakes the object next: its alarm, or a pending retry of it."""
    if not tables.has("_durability_alarm"):
        return None
    rows = tables.rows("SELECT scheduled_ms, retry_ms FROM _durability_alarm WHERE id = 1")
    times = (
        [t for t in (rows[0]["scheduled_ms"], rows[0]["retry_ms"]) if t is not None] if rows else []
    )
    return min(times) if times else None


def format_size(size_bytes: Any) -> str:
    """Bytes as B, KiB or MiB, for the command's tables and the dashboard."""
    if size_bytes < 1024:
        return f"{size_bytes} B"
    if size_bytes < 1024 * 1024:
        return f"{size_bytes / 1024:.1f} KiB"
    return f"{size_bytes / 1024 / 1024:.1f} MiB"
