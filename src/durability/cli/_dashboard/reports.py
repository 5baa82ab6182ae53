"""The dashboard's reports, re-read only for the object files that changed.

Every open tab asks for a fresh panel every few seconds; reading every object's file
each time costs a connection and a dozen queries per object. A report is kept with its
file's signature (size and modification time of the database and of its write-ahead
log) and reused while the signature holds. A file modified within `SETTLE_NS` of the
last read is read again whatever its signature says: a file system stamps times at a
coarse tick, so a write landing in the same tick as the read could leave the signature
unchanged.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from ..._object_files import ObjectFile, find_objects
from .._inspect import ObjectReport
from .._inspect.report import read_object

SETTLE_NS = 2_000_000_000
"""How long after its last change a file's signature is trusted (two seconds)."""

Signature = tuple[int, int, int, int]
"""Size and modification time (ns) of an object's database, then of its log (0 if none)."""


@dataclass(frozen=True, slots=True)
class _Kept:
    signature: Signature
    report: ObjectReport


class ReportCache:
    """The last report of each object file under one runtime directory."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._kept: dict[Path, _Kept] = {}
        self.reads = 0
        """How many object files were opened and read (for tests and diagnostics)."""

    def reports(self) -> list[ObjectReport]:
        """Every object's report, read again only where its file changed.

        Raises `InspectError` like `inspect_path` when the directory is not a runtime's.
        """
        found = find_objects(self._path)
        trusted_before = time.time_ns() - SETTLE_NS
        kept: dict[Path, _Kept] = {}
        reports = []
        for object_file in found:
            entry = self._current(object_file, trusted_before)
            kept[object_file.file] = entry
            reports.append(entry.report)
        self._kept = kept
        return reports

    def _current(self, object_file: ObjectFile, trusted_before: int) -> _Kept:
        signature = _signature(object_file.file)
        previous = self._kept.get(object_file.file)
        settled = max(signature[1], signature[3]) < trusted_before
        if previous is not None and settled and previous.signature == signature:
            return previous
        self.reads += 1
        return _Kept(signature, read_object(object_file))


def _signature(file: Path) -> Signature:
    database = _stat(file)
    log = _stat(file.with_name(file.name + "-wal"))
    return (*database, *log)


def _stat(file: Path) -> tuple[int, int]:
    try:
        status = os.stat(file)
    except FileNotFoundError:
        return (0, 0)
    return (status.st_size, status.st_mtime_ns)
