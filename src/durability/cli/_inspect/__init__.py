"""Read a runtime directory without changing it: what each object holds and owes.

`inspect_path(path)` opens every object's SQLite file read-only (it works while a
runtime serves the path) and returns one JSON-ready report per object: its name, file
size, armed alarm, operations, named alarms, log and fanout state. The `durability
inspect` command prints these reports; a dashboard can reuse them as they are.
"""

from __future__ import annotations

from ..._object_files import InspectError, ObjectFile, find_objects
from .report import ObjectReport, format_size, inspect_path, read_object

__all__ = [
    "InspectError",
    "ObjectFile",
    "ObjectReport",
    "find_objects",
    "format_size",
    "inspect_path",
    "read_object",
]
