"""The workflows an object holds, read for `durability inspect` and the dashboard."""

from __future__ import annotations

from typing import Any

from ..._types import JsonValue
from .tables import DETAIL_ROWS, Tables

_STATE_ORDER = (
    "CASE state WHEN 'errored' THEN 0 WHEN 'running' THEN 1 WHEN 'waitingForPause' THEN 2 "
    "WHEN 'waiting' THEN 3 WHEN 'queued' THEN 4 WHEN 'paused' THEN 5 ELSE 6 END"
)


def workflows(tables: Tables) -> JsonValue:
    """Instances by state, and the instances themselves (unfinished and errored first):
    each with its steps (status, attempts, timings, stored errors), sleeps, awaited
    events and the events kept for it."""
    if not tables.has("durability_workflow_instances", "durability_workflow_steps"):
        return None
    counts = {
        row["state"]: row["n"]
        for row in tables.rows(
            "SELECT state, COUNT(*) AS n FROM durability_workflow_instances GROUP BY state"
        )
    }
    instances = tables.rows(
        "SELECT instance_key, workflow, instance_id, state, attempt AS runs, "
        "CASE WHEN status = 'pending' THEN next_attempt_at END AS next_run_at, created_at, "
        "started_at, ended_at, error_name, error_message, error_stack "
        f"FROM durability_workflow_instances ORDER BY {_STATE_ORDER}, instance_key LIMIT ?",
        DETAIL_ROWS,
    )
    found: list[JsonValue] = []
    for instance in instances:
        key = instance.pop("instance_key")
        instance["steps"] = _steps(tables, key)
        instance["events"] = _events(tables, key)
        found.append(instance)
    return {"counts": {state: counts[state] for state in sorted(counts)}, "instances": found}


def _steps(tables: Tables, key: str) -> list[JsonValue]:
    steps: list[dict[str, Any]] = tables.rows(
        "SELECT kind, name, status, attempt, started_at, ended_at, wake_at, "
        "CASE WHEN kind = 'wait' THEN detail END AS event_type, error_name, error_message, "
        "error_stack FROM durability_workflow_steps WHERE instance_key = ? ORDER BY seq LIMIT ?",
        key,
        DETAIL_ROWS,
    )
    return list(steps)


def _events(tables: Tables, key: str) -> list[JsonValue]:
    if not tables.has("durability_workflow_events"):
        return []
    events: list[dict[str, Any]] = tables.rows(
        "SELECT type, sent_at FROM durability_workflow_events WHERE instance_key = ? "
        "ORDER BY id LIMIT ?",
        key,
        DETAIL_ROWS,
    )
    return list(events)
