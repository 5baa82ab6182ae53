"""The dashboard's view of an object's workflows: instances, their steps and events."""

from __future__ import annotations

from typing import Any

from .._inspect import ObjectReport
from .html import error_cell, moment, table, tag, text, traceback


def _error_row(row: dict[str, Any]) -> dict[str, Any]:
    """A workflow or step row in the shape the error cells read."""
    return {
        "last_error": row.get("error_message"),
        "last_error_name": row.get("error_name"),
        "last_error_stack": row.get("error_stack"),
    }


def workflow_failures(report: ObjectReport) -> list[dict[str, Any]]:
    """The object's errored instances, as rows of the recent failures section."""
    section = report.get("workflows") or {}
    return [
        {
            **_error_row(row),
            "workflow": row["workflow"],
            "instance_id": row["instance_id"],
            "status": "failed",
            "attempt": row["runs"],
            "next_attempt_at": row["ended_at"] or 0,
        }
        for row in section.get("instances") or []
        if row["state"] == "errored"
    ]


def workflows_section(report: ObjectReport, now_ms: int) -> str:
    """Each instance's state and runs, then its steps with attempts, timings and errors."""
    section: dict[str, Any] | None = report.get("workflows")
    if section is None:
        return ""
    badges = " ".join(
        tag("span", text(state), class_=f"status {state}") + " " + text(count)
        for state, count in section["counts"].items()
    )
    parts = [tag("h4", "Workflows " + tag("span", badges, class_="badges"))]
    for row in section["instances"]:
        label = f"{row['workflow']} / {row['instance_id']}"
        summary = (
            tag("code", text(label))
            + " "
            + tag("span", text(row["state"]), class_=f"status {row['state']}")
            + f" · {text(row['runs'])} runs"
        )
        if row["next_run_at"] is not None:
            summary += " · next run " + moment(row["next_run_at"], now_ms)
        error = _error_row(row)
        if error["last_error"] is not None:
            summary += " · " + error_cell(error)
        parts.append(tag("p", summary, class_="workflow"))
        steps = [
            [
                text(step["kind"]),
                tag("code", text(step["name"])),
                tag("span", text(step["status"]), class_=f"status {step['status']}"),
                text(step["attempt"]) if step["kind"] == "do" else "",
                moment(step["started_at"], now_ms),
                moment(step["ended_at"], now_ms) if step["ended_at"] is not None else "",
                moment(step["wake_at"], now_ms) if step["wake_at"] is not None else "",
                text(step["event_type"]),
                error_cell(_error_row(step))
                + traceback(_error_row(step), report["id"], label, step["kind"], step["name"]),
            ]
            for step in row["steps"]
        ]
        if steps:
            header = [
                "Kind",
                "Step",
                "Status",
                "Attempts",
                "Started",
                "Ended",
                "Wakes",
                "Event",
                "Last error",
            ]
            parts.append(table(header, steps))
        if row["events"]:
            kept = ", ".join(
                f"{text(event['type'])} ({moment(event['sent_at'], now_ms)})"
                for event in row["events"]
            )
            parts.append(tag("p", "Events kept: " + kept, class_="muted"))
    return "".join(parts)
