"""`check_path`: the stored pending work of a runtime's data, against the new code."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._object_files import ObjectFile, find_objects, open_read_only
from ..._types import JsonValue
from ...runtime.server import WorkerModule
from .._inspect.tables import Tables
from .capabilities import CAPABILITIES
from .findings import Finding, Pending
from .probe import Declared
from .schema import class_migrations, schema_changes


@dataclass
class CheckReport:
    """The findings (what the new code cannot run) and the migrations it would apply."""

    path: str
    objects: int = 0
    pending: int = 0
    findings: list[Finding] = field(default_factory=list)
    applies: list[JsonValue] = field(default_factory=list)
    """Schema migrations the new code applies to each object, and the class migrations
    of a project it applies to the state folder (none of them a finding)."""

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "path": self.path,
            "objects": self.objects,
            "pending": self.pending,
            "findings": [finding.to_json() for finding in self.findings],
            "migrations": self.applies,
        }


@dataclass
class _Object:
    """One object being checked: where it is, and what its findings say about it."""

    found: ObjectFile
    name: str | None

    def finding(self, kind: str, what: str, handler: str, id: str, detail: str) -> Finding:
        return Finding(
            kind, what, self.found.namespace, self.name, self.found.id, handler, id, detail
        )


def check_path(data: Path, module: WorkerModule, declared: dict[str, Declared]) -> CheckReport:
    """Check every object under `data` (read-only) against the worker `module`, whose
    classes declare `declared`. Raises `InspectError` for a path that is no runtime's."""
    report = CheckReport(str(data))
    deleted: set[str] = set()
    project = module.project
    if project is not None:
        planned = class_migrations(data, project.migrations, project.classes)
        deleted.update(planned.deleted)
        report.applies += [{"project": line} for line in planned.done]
        if planned.refusal is not None:
            report.findings.append(
                Finding(
                    "migration_refused",
                    "class migration",
                    "",
                    None,
                    "",
                    "migrations",
                    "",
                    planned.refusal,
                )
            )
    for found in find_objects(data):
        report.objects += 1
        _check_object(report, found, declared.get(found.namespace), found.namespace in deleted)
    return report


def _check_object(
    report: CheckReport, found: ObjectFile, declared: Declared | None, deleted: bool
) -> None:
    try:
        connection = open_read_only(found.file)
    except sqlite3.Error as error:
        report.findings.append(
            _Object(found, None).finding("unreadable", "object", "", found.id, str(error))
        )
        return
    try:
        connection.execute("BEGIN")
        tables = Tables(connection)
        target = _Object(found, _name(tables))
        items = [
            (capability, item) for capability in CAPABILITIES for item in capability.pending(tables)
        ]
        report.pending += len(items)
        report.findings += _item_findings(target, items, declared, deleted)
        if declared is None and not deleted:
            report.findings += _alarm_finding(target, tables)
        for change in schema_changes(tables):
            report.findings += _schema_findings(target, change)
            if change.applies:
                report.applies.append(
                    {
                        "namespace": found.namespace,
                        "object": target.name,
                        "object_id": found.id,
                        "capability": change.capability,
                        "migrations": list(change.applies),
                    }
                )
    except sqlite3.Error as error:
        report.findings.append(
            _Object(found, None).finding("unreadable", "object", "", found.id, str(error))
        )
    finally:
        connection.close()


def _item_findings(
    target: _Object, items: list[tuple[Any, Pending]], declared: Declared | None, deleted: bool
) -> list[Finding]:
    findings = []
    namespace = target.found.namespace
    for capability, item in items:
        if deleted:
            detail = (
                f"a class migration deletes every object of {namespace}, "
                f"and this {item.what} with it"
            )
            findings.append(
                target.finding("objects_deleted", item.what, item.handler, item.id, detail)
            )
        elif declared is None:
            detail = (
                f"the new code binds no class as {namespace}: nothing will run this {item.what}"
            )
            findings.append(
                target.finding("unbound_namespace", item.what, item.handler, item.id, detail)
            )
        elif declared.failure is not None:
            detail = (
                f"an object of {namespace} cannot be built with the new code ({declared.failure})"
            )
            findings.append(
                target.finding("constructor_failed", item.what, item.handler, item.id, detail)
            )
        else:
            handlers = declared.of(capability)
            if handlers is None or item.handler not in handlers:
                known = ", ".join(sorted(handlers or ())) or "none"
                detail = (
                    f"the new code has no handler {item.handler!r} for this {item.what} "
                    f"(it has: {known})"
                )
                findings.append(
                    target.finding("missing_handler", item.what, item.handler, item.id, detail)
                )
                continue
            problem = capability.problem(handlers[item.handler], item)
            if problem is not None:
                findings.append(
                    target.finding(problem[0], item.what, item.handler, item.id, problem[1])
                )
    return findings


def _alarm_finding(target: _Object, tables: Tables) -> list[Finding]:
    """An unbound object's armed alarm: the runtime skips it."""
    if not tables.has("_durability_alarm"):
        return []
    rows = tables.rows("SELECT scheduled_ms, retry_ms FROM _durability_alarm WHERE id = 1")
    times = [t for t in (rows[0].values() if rows else ()) if t is not None]
    if not times:
        return []
    namespace = target.found.namespace
    detail = (
        f"its alarm is armed, but the new code binds no class as {namespace}: it will be skipped"
    )
    return [target.finding("unbound_namespace", "alarm", "alarm", str(min(times)), detail)]


def _schema_findings(target: _Object, change: Any) -> list[Finding]:
    if not change.reverts:
        return []
    if change.refuses:
        detail = (
            f"{change.capability}'s schema is {len(change.reverts)} migrations ahead of the new "
            "code, which refuses to revert more than 2: the object's helpers will fail to start"
        )
        return [
            target.finding(
                "migration_refused", "migration", change.capability, change.reverts[-1], detail
            )
        ]
    return [
        target.finding(
            "migration_reverts",
            "migration",
            change.capability,
            name,
            f"the new code does not know this {change.capability} migration and reverts it "
            "(the tables and columns it added are dropped)",
        )
        for name in change.reverts
    ]


def _name(tables: Tables) -> str | None:
    if not tables.has("_durability_name"):
        return None
    rows = tables.rows("SELECT name FROM _durability_name WHERE id = 1")
    return str(rows[0]["name"]) if rows else None
