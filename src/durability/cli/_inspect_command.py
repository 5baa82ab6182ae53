"""`durability inspect`: the inspection reports as plain-text tables or one JSON document.

In text mode every line passes through `printable` (and every table cell before its
width is measured), so no stored name, id or error text reaches the terminal with its
control characters; `--json` prints the strings exactly (JSON escapes them itself).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from ._inspect import InspectError, ObjectReport, format_size, inspect_path
from ._terminal import printable

_ERROR_WIDTH = 60
"""Last errors are cut to this many characters in tables (`--json` has them whole)."""


def run(path: str, namespace: str | None, name: str | None, as_json: bool) -> int:
    """Print the reports for `path`; 0, or 1 with a one-line error on stderr."""
    try:
        reports = inspect_path(path, namespace, name)
    except InspectError as error:
        print(f"durability inspect: {printable(error)}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps({"objects": reports}, indent=2))
    else:
        print(render(reports), end="")
    return 0


def render(reports: Sequence[ObjectReport]) -> str:
    """The reports as text: one block per object, a table per kind of work."""
    if not reports:
        return "no objects\n"
    blocks = [
        "".join(f"{printable(line)}\n" for line in _object_lines(report)) for report in reports
    ]
    return "\n".join(blocks)


def _object_lines(report: ObjectReport) -> list[str]:
    name = report["name"] if report["name"] is not None else "(no name recorded)"
    lines = [
        f"{report['namespace']} / {name}",
        f"  id {report['id']}  {format_size(report['size_bytes'])}"
        f"  alarm {_time(report['alarm_at'])}",
    ]
    if "error" in report:
        return [*lines, f"  error: {report['error']}"]
    for section in _SECTIONS:
        lines.extend(section(report))
    return lines


def _operations(report: ObjectReport) -> list[str]:
    counts: dict[str, Any] = report["operations"]
    if not counts:
        return []
    summary = ", ".join(f"{status} {count}" for status, count in counts.items())
    rows = [
        [
            row["id"],
            row["operation"],
            row["status"],
            row["attempt"],
            _time(row["next_attempt_at"]) if row["status"] == "pending" else "",
            _error(row),
        ]
        for row in report["operation_details"]
    ]
    header = ["ID", "OPERATION", "STATUS", "ATTEMPTS", "NEXT ATTEMPT", "LAST ERROR"]
    details = report["operation_details"]
    return [f"  operations: {summary}", *_table(header, rows), *_stacks(details, "id")]


def _named_alarms(report: ObjectReport) -> list[str]:
    alarms: list[dict[str, Any]] = report["named_alarms"]
    if not alarms:
        return []
    rows = [
        [
            row["name"],
            row["status"],
            _time(row["scheduled_at"]),
            _time(row["next_attempt_at"]) if row["status"] == "pending" else "",
            row["attempt"],
            _error(row),
        ]
        for row in alarms
    ]
    header = ["NAME", "STATUS", "SCHEDULED", "NEXT ATTEMPT", "ATTEMPTS", "LAST ERROR"]
    return [f"  named alarms: {len(alarms)}", *_table(header, rows), *_stacks(alarms, "name")]


def _log(report: ObjectReport) -> list[str]:
    log: dict[str, Any] | None = report["log"]
    if log is None:
        return []
    lines = [
        f"  log: offsets {log['oldest_offset']}..{log['next_offset'] - 1} "
        f"(hot from {log['hot_offset']}: {log['hot_records']} records, "
        f"{format_size(log['hot_bytes'])}), next {log['next_offset']}"
    ]
    cursors = [
        [row["consumer"], row["offset"], row["lag"], _time(row["committed_at"])]
        for row in log["cursors"]
    ]
    if cursors:
        lines.extend(_table(["CONSUMER", "CURSOR", "LAG", "COMMITTED"], cursors))
    leases = [
        [
            row["consumer"],
            f"{row['first_offset']}..{row['last_offset']}",
            row["state"],
            row["attempt"],
            _time(row["expires_at"]),
        ]
        for row in log["leases"]
    ]
    if leases:
        lines.extend(_table(["LEASED BY", "OFFSETS", "STATE", "ATTEMPT", "EXPIRES"], leases))
    return lines


def _fanout(report: ObjectReport) -> list[str]:
    fanout: dict[str, Any] | None = report["fanout"]
    if fanout is None:
        return []
    rows = [
        [
            row["target_id"],
            "dead letter" if row["phase"] == "dead_letter" else "pending",
            row["attempt"],
            _time(row["next_attempt_at"]) if row["phase"] == "delivery" else "",
            _error(row),
        ]
        for row in fanout["deliveries"]
    ]
    summary = f"  fanout: backlog {fanout['backlog']}, dead letters {fanout['dead_letters']}"
    if not rows:
        return [summary]
    header = ["TARGET", "STATE", "ATTEMPTS", "NEXT ATTEMPT", "LAST ERROR"]
    return [summary, *_table(header, rows)]


def _storage(report: ObjectReport) -> list[str]:
    storage: dict[str, Any] | None = report.get("storage")
    if not storage or (not storage["tables"] and not storage["kv_keys"]):
        return []
    parts = [f"table {name} {_count(count, 'row')}" for name, count in storage["tables"].items()]
    if storage["kv_keys"]:
        parts.append(f"KV {_count(storage['kv_keys'], 'key')}")
    return [f"  storage: {', '.join(parts)}"]


def _count(count: int, unit: str) -> str:
    return f"{count:,} {unit}{'' if count == 1 else 's'}"


def _workflows(report: ObjectReport) -> list[str]:
    section: dict[str, Any] | None = report.get("workflows")
    if section is None:
        return []
    summary = ", ".join(f"{state} {count}" for state, count in section["counts"].items())
    lines = [f"  workflows: {summary}"]
    for row in section["instances"]:
        runs = f"{row['runs']} run{'s' if row['runs'] != 1 else ''}"
        wake = f", next run {_time(row['next_run_at'])}" if row["next_run_at"] is not None else ""
        error = _error(_as_error(row))
        lines.append(
            f"    {row['workflow']} / {row['instance_id']}: {row['state']}, {runs}{wake}"
            + (f"  {error}" if error else "")
        )
        steps = [
            [
                row_step["kind"],
                row_step["name"],
                row_step["status"],
                row_step["attempt"] if row_step["kind"] == "do" else "",
                _time(row_step["started_at"]),
                _time(row_step["ended_at"]) if row_step["ended_at"] is not None else "",
                _time(row_step["wake_at"]) if row_step["wake_at"] is not None else "",
                row_step["event_type"] or "",
                _error(_as_error(row_step)),
            ]
            for row_step in row["steps"]
        ]
        if steps:
            header = [
                "KIND",
                "STEP",
                "STATUS",
                "ATTEMPTS",
                "STARTED",
                "ENDED",
                "WAKES",
                "EVENT",
                "LAST ERROR",
            ]
            lines.extend("  " + line for line in _table(header, steps))
        if row["events"]:
            kept = ", ".join(
                f"{event['type']} ({_time(event['sent_at'])})" for event in row["events"]
            )
            lines.append(f"      events kept: {kept}")
    return lines


def _as_error(row: dict[str, Any]) -> dict[str, Any]:
    return {"last_error": row["error_message"], "last_error_name": row["error_name"]}


_SECTIONS: tuple[Callable[[ObjectReport], list[str]], ...] = (
    _operations,
    _named_alarms,
    _log,
    _fanout,
    _storage,
    _workflows,
)


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """Left-aligned columns, indented under their section line."""
    cells = [
        header,
        *[["" if value is None else printable(value) for value in row] for row in rows],
    ]
    widths = [max(len(row[column]) for row in cells) for column in range(len(header))]
    return [
        (
            "    " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        ).rstrip()
        for row in cells
    ]


def _stacks(rows: list[dict[str, Any]], key: str) -> list[str]:
    """Where each stored error was raised: the innermost frame of its traceback."""
    lines: list[str] = []
    for row in rows:
        stack = row.get("last_error_stack")
        if not stack:
            continue
        frames = [line for line in stack.rstrip().splitlines() if line.strip(" ^~")]
        starts = [i for i, line in enumerate(frames) if line.lstrip().startswith('File "')]
        lines.append(f"    {row[key]} raised at:")
        lines.extend(f"    {line}" for line in frames[starts[-1] if starts else 0 :])
    return lines


def _error(row: dict[str, Any]) -> str:
    if row["last_error"] is None and row["last_error_name"] is None:
        return ""
    text = f"{row['last_error_name'] or 'Error'}: {row['last_error'] or ''}".rstrip(": ")
    text = " ".join(text.split())
    return text if len(text) <= _ERROR_WIDTH else text[: _ERROR_WIDTH - 3] + "..."


def _time(ms: Any) -> str:
    if ms is None:
        return "-"
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
