"""The dashboard's panel: the inspection reports of a runtime directory as HTML.

The panel is rendered here, on the server, from the same reports `durability inspect`
prints, and the page swaps in a fresh copy every few seconds. Sections: a summary of
the whole directory, the recent failures with their stored errors and tracebacks,
then every object by namespace and name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any

from .._inspect import ObjectReport, format_size
from .._inspect.sections import COUNT_CAP
from .html import error_cell, moment, stable_id, table, tag, text, traceback, utc
from .workflows import workflow_failures, workflows_section

FAILURE_ROWS = 50
"""At most this many entries in the recent failures section."""

OBJECT_CARDS = 200
"""At most this many objects are shown one by one (the summary counts them all)."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the dashboard shows at one moment: the reports and the runtime's time."""

    now_ms: int
    virtual_time: bool
    path: str | None
    objects: Sequence[ObjectReport]
    error: str | None = None
    """Why the directory could not be read, when it could not."""


def render_panel(snapshot: Snapshot) -> str:
    """The panel's HTML for `snapshot` (every user-controlled string escaped)."""
    parts = [_summary(snapshot)]
    if snapshot.error is not None:
        parts.append(tag("p", text(snapshot.error), class_="problem"))
    parts.append(_failures(snapshot))
    objects = sorted(snapshot.objects, key=_order)
    for namespace, group in groupby(objects[:OBJECT_CARDS], key=lambda report: report["namespace"]):
        parts.append(_namespace(namespace, list(group), snapshot.now_ms))
    if len(objects) > OBJECT_CARDS:
        hidden = f"{len(objects) - OBJECT_CARDS} more objects not shown here: "
        command = tag("code", "durability inspect PATH NAMESPACE [NAME]")
        parts.append(tag("p", text(hidden) + command + " shows any of them.", class_="muted"))
    if not snapshot.objects and snapshot.error is None:
        parts.append(
            tag("p", "No objects yet: they appear once a request reaches one.", class_="muted")
        )
    return "\n".join(parts)


def _order(report: ObjectReport) -> tuple[str, bool, str, str]:
    """By namespace, then named objects by name, then the unnamed by id."""
    name = report["name"]
    return (report["namespace"], name is None, name or "", report["id"])


def _summary(snapshot: Snapshot) -> str:
    objects = snapshot.objects
    statuses: dict[str, int] = {}
    for report in objects:
        for status, count in (report.get("operations") or {}).items():
            statuses[status] = statuses.get(status, 0) + count
    fanouts = [report["fanout"] for report in objects if report.get("fanout")]
    flows: dict[str, int] = {}
    for report in objects:
        for state, count in ((report.get("workflows") or {}).get("counts") or {}).items():
            flows[state] = flows.get(state, 0) + count
    totals = [
        ("objects", len(objects)),
        ("pending operations", statuses.get("pending", 0)),
        ("failed operations", statuses.get("failed", 0)),
        ("named alarms", sum(len(report.get("named_alarms") or []) for report in objects)),
        ("fanout backlog", sum(fanout["backlog"] for fanout in fanouts)),
        ("dead letters", sum(fanout["dead_letters"] for fanout in fanouts)),
        ("workflow instances", sum(flows.values())),
        ("errored workflows", flows.get("errored", 0)),
    ]
    cells = "".join(
        tag(
            "div",
            tag("dt", text(label)) + tag("dd", text(value)),
            class_=_total_class(label, value),
        )
        for label, value in totals
    )
    clock = "virtual time" if snapshot.virtual_time else "wall clock"
    now = tag(
        "p",
        f"now {utc(snapshot.now_ms)} "
        + tag("span", text(clock), class_="badge virtual" if snapshot.virtual_time else "badge"),
        class_="clock",
        id="clock",
        data_now_ms=snapshot.now_ms,
    )
    return tag("section", now + tag("dl", cells, class_="totals"), id="summary")


def _total_class(label: str, value: int) -> str:
    if value and label in ("failed operations", "dead letters", "errored workflows"):
        return "total bad"
    return "total"


def _failures(snapshot: Snapshot) -> str:
    """Records whose last attempt failed: terminal failures first, then those retrying."""
    entries: list[tuple[ObjectReport, str, str, dict[str, Any]]] = []
    for report in snapshot.objects:
        if "error" in report:
            continue
        for row in report.get("operation_details") or []:
            if row["last_error_name"] is not None or row["last_error"] is not None:
                entries.append((report, "operation", row["operation"] + " " + row["id"], row))
        for row in report.get("named_alarms") or []:
            if row["last_error_name"] is not None or row["last_error"] is not None:
                entries.append((report, "named alarm", row["name"], row))
        entries.extend(
            (report, "workflow", f"{row['workflow']} {row['instance_id']}", row)
            for row in workflow_failures(report)
        )
    entries.sort(key=lambda entry: (entry[3]["status"] != "failed", -entry[3]["next_attempt_at"]))
    rows = [
        [
            _object_link(report),
            text(kind),
            tag("code", text(what)),
            _status(row["status"]),
            text(row["attempt"]),
            error_cell(row) + traceback(row, report["id"], kind, what, "failures"),
        ]
        for report, kind, what, row in entries[:FAILURE_ROWS]
    ]
    title = tag("h2", "Recent failures " + tag("span", text(len(entries)), class_="count"))
    if not rows:
        return tag("section", title + tag("p", "None.", class_="muted"), id="failures")
    header = ["Object", "Kind", "Record", "Status", "Attempts", "Last error"]
    return tag("section", title + table(header, rows), id="failures")


def _object_link(report: ObjectReport) -> str:
    label = f"{report['namespace']} / {_name(report)}"
    return tag("a", text(label), href="#" + _anchor(report))


def _name(report: ObjectReport) -> str:
    name = report["name"]
    return str(name) if name is not None else "(no name recorded)"


def _anchor(report: ObjectReport) -> str:
    return stable_id("object", report["namespace"], report["id"])


def _namespace(namespace: str, reports: list[ObjectReport], now_ms: int) -> str:
    count = tag(
        "span", text(f"{len(reports)} object{'s' if len(reports) != 1 else ''}"), class_="count"
    )
    title = tag("h2", text(namespace) + " " + count)
    articles = "".join(_object(report, now_ms) for report in reports)
    return tag("section", title + articles, class_="namespace")


def _object(report: ObjectReport, now_ms: int) -> str:
    name_class = "name" if report["name"] is not None else "name muted"
    header = tag(
        "header",
        tag("h3", tag("span", text(_name(report)), class_=name_class))
        + tag(
            "p",
            tag("code", text(report["id"][:16]) + "…", title=report["id"])
            + f" · {text(format_size(report['size_bytes']))}"
            + f" · next wake-up {moment(next_wake_up(report), now_ms)}",
            class_="meta",
        ),
    )
    if "error" in report:
        return tag(
            "article",
            header + tag("p", text(report["error"]), class_="problem"),
            class_="object",
            id=_anchor(report),
        )
    body = [
        _operations(report, now_ms),
        _named_alarms(report, now_ms),
        _log(report, now_ms),
        _fanout(report, now_ms),
        _storage(report),
        workflows_section(report, now_ms),
    ]
    content = "".join(part for part in body if part) or tag(
        "p", "Nothing stored yet.", class_="muted"
    )
    return tag("article", header + content, class_="object", id=_anchor(report))


def next_wake_up(report: ObjectReport) -> int | None:
    """When the object runs next: its earliest pending work, or its alarm if sooner.

    The alarm alone can mislead: work due within the scheduler's minimum alarm delay
    runs from an in-memory timer, while the alarm waits later as a safety net.
    """
    times = [report.get("alarm_at")]
    times += [
        row["next_attempt_at"]
        for row in [*(report.get("operation_details") or []), *(report.get("named_alarms") or [])]
        if row["status"] == "pending"
    ]
    fanout = report.get("fanout")
    if fanout is not None:
        times += [
            row["next_attempt_at"] for row in fanout["deliveries"] if row["phase"] == "delivery"
        ]
    known = [time for time in times if time is not None]
    return min(known) if known else None


def _storage(report: ObjectReport) -> str:
    storage: dict[str, Any] | None = report.get("storage")
    if not storage or (not storage["tables"] and not storage["kv_keys"]):
        return ""
    parts = [f"{name}: {_rows(count)}" for name, count in storage["tables"].items()]
    if storage["kv_keys"]:
        parts.append(f"KV: {_rows(storage['kv_keys'], 'key')}")
    return tag("h4", "Storage " + tag("span", text(" · ".join(parts)), class_="badges"))


def _rows(count: int, unit: str = "row") -> str:
    shown = f"{COUNT_CAP:,}+" if count >= COUNT_CAP else f"{count:,}"
    return f"{shown} {unit}{'' if count == 1 else 's'}"


def _status(status: str) -> str:
    return tag("span", text(status.replace("_", " ")), class_=f"status {status}")


def _operations(report: ObjectReport, now_ms: int) -> str:
    counts: dict[str, int] = report.get("operations") or {}
    if not counts:
        return ""
    badges = " ".join(_status(status) + " " + text(count) for status, count in counts.items())
    rows = [
        [
            tag("code", text(row["id"])),
            text(row["operation"]),
            _status(row["status"]),
            text(row["attempt"]),
            moment(row["next_attempt_at"], now_ms) if row["status"] == "pending" else "",
            error_cell(row)
            + traceback(row, report["id"], "operation", row["operation"], row["id"]),
        ]
        for row in report.get("operation_details") or []
    ]
    title = tag("h4", "Operations " + tag("span", badges, class_="badges"))
    if not rows:
        return title
    header = ["Id", "Operation", "Status", "Attempts", "Next attempt", "Last error"]
    return title + table(header, rows)


def _named_alarms(report: ObjectReport, now_ms: int) -> str:
    alarms: list[dict[str, Any]] = report.get("named_alarms") or []
    if not alarms:
        return ""
    rows = [
        [
            tag("code", text(row["name"])),
            _status(row["status"]),
            moment(row["scheduled_at"], now_ms),
            moment(row["next_attempt_at"], now_ms) if row["status"] == "pending" else "",
            text(row["attempt"]),
            error_cell(row) + traceback(row, report["id"], "named alarm", row["name"]),
        ]
        for row in alarms
    ]
    header = ["Name", "Status", "Scheduled", "Next attempt", "Attempts", "Last error"]
    return tag("h4", "Named alarms") + table(header, rows)


def _log(report: ObjectReport, now_ms: int) -> str:
    log: dict[str, Any] | None = report.get("log")
    if log is None:
        return ""
    bounds = (
        f"offsets {log['oldest_offset']}…{log['next_offset'] - 1} · hot from "
        f"{log['hot_offset']}: {log['hot_records']} records, {format_size(log['hot_bytes'])}"
    )
    parts = [tag("h4", "Log " + tag("span", text(bounds), class_="badges"))]
    cursors = [
        [
            tag("code", text(row["consumer"])),
            text(row["offset"]),
            _lag(row["lag"]),
            moment(row["committed_at"], now_ms),
        ]
        for row in log["cursors"]
    ]
    if cursors:
        parts.append(table(["Consumer", "Cursor", "Lag", "Committed"], cursors))
    leases = [
        [
            tag("code", text(row["consumer"])),
            text(f"{row['first_offset']}…{row['last_offset']}"),
            _status(row["state"]),
            text(row["attempt"]),
            moment(row["expires_at"], now_ms),
        ]
        for row in log["leases"]
    ]
    if leases:
        parts.append(table(["Leased by", "Offsets", "State", "Attempt", "Expires"], leases))
    return "".join(parts)


def _lag(lag: int) -> str:
    return tag("span", text(lag), class_="lag" if lag else "muted")


def _fanout(report: ObjectReport, now_ms: int) -> str:
    fanout: dict[str, Any] | None = report.get("fanout")
    if fanout is None:
        return ""
    summary = f"backlog {fanout['backlog']} · dead letters {fanout['dead_letters']}"
    title = tag("h4", "Fanout " + tag("span", text(summary), class_="badges"))
    rows = [
        [
            tag("code", text(row["target_id"])),
            _status("dead_letter" if row["phase"] == "dead_letter" else "pending"),
            text(row["attempt"]),
            moment(row["next_attempt_at"], now_ms) if row["phase"] == "delivery" else "",
            error_cell(row),
        ]
        for row in fanout["deliveries"]
    ]
    if not rows:
        return title
    return title + table(["Target", "State", "Attempts", "Next attempt", "Last error"], rows)
