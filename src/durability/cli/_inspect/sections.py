"""What each capability keeps in an object's database, read as JSON-ready values.

One function per capability, each given the object's tables and returning `None` when
the capability never ran there (its tables do not exist). `SECTIONS` lists them in
report order: a new capability is one more function and one more entry.
"""

from __future__ import annotations

from collections.abc import Callable

from ..._types import JsonValue
from .tables import DETAIL_ROWS, Tables
from .workflows import workflows


def operation_counts(tables: Tables) -> JsonValue:
    """Durable operations by status: `{status: count}` (empty when none ran).

    Completed calls are the total minus the others, so the count reads the index of the
    calls not completed instead of every row."""
    if not tables.has("durability_calls"):
        return {}
    counts: dict[str, int] = {
        row["status"]: row["n"]
        for row in tables.rows(
            "SELECT status, COUNT(*) AS n FROM durability_calls "
            "WHERE status != 'completed' GROUP BY status"
        )
    }
    total = tables.rows("SELECT COUNT(*) AS n FROM durability_calls")[0]["n"]
    completed = total - sum(counts.values())
    if completed:
        counts["completed"] = completed
    return {status: counts[status] for status in sorted(counts)}


def operation_details(tables: Tables) -> JsonValue:
    """Operations not completed (pending, failed, cancelled): id, attempts, next attempt,
    last error and its stack."""
    if not tables.has("durability_calls"):
        return []
    return [
        dict(row)
        for row in tables.rows(
            "SELECT id, operation, status, attempt, next_attempt_at, last_error_name, "
            f"last_error, {_stack(tables, 'durability_calls', 'id')} AS last_error_stack "
            "FROM durability_calls AS record WHERE status != 'completed' "
            "ORDER BY status = 'pending', next_attempt_at, id LIMIT ?",
            DETAIL_ROWS,
        )
    ]


def named_alarms(tables: Tables) -> JsonValue:
    """Every named alarm: its status, scheduled time, next attempt, last error and stack."""
    if not tables.has("durability_alarms"):
        return []
    return [
        dict(row)
        for row in tables.rows(
            "SELECT name, status, scheduled_at, next_attempt_at, attempt, last_error_name, "
            f"last_error, {_stack(tables, 'durability_alarms', 'name')} AS last_error_stack "
            "FROM durability_alarms AS record ORDER BY next_attempt_at, name LIMIT ?",
            DETAIL_ROWS,
        )
    ]


def _stack(tables: Tables, table: str, key: str) -> str:
    """SQL for the traceback stored with `record`'s last error (NULL when none is)."""
    if not tables.has("durability_error_stacks"):
        return "NULL"
    return (
        "(SELECT stack FROM durability_error_stacks AS s WHERE s.record_table = "
        f"'{table}' AND s.record_key = record.{key} "
        "AND s.generation_id = record.generation_id)"
    )


def log(tables: Tables) -> JsonValue:
    """The log's bounds and size, each consumer's cursor and lag, and live leases."""
    if not tables.has("durability_log_seq", "durability_log_records", "durability_log_cursors"):
        return None
    seq = tables.rows("SELECT next_offset, total_bytes FROM durability_log_seq WHERE id = 1")
    if not seq:
        return None
    next_offset = int(seq[0]["next_offset"])
    hot = tables.rows("SELECT MIN(offset) AS first, COUNT(*) AS n FROM durability_log_records")[0]
    hot_offset = next_offset if hot["first"] is None else int(hot["first"])
    oldest = hot_offset
    if tables.has("durability_log_segments"):
        cold = tables.rows("SELECT MIN(first_offset) AS first FROM durability_log_segments")
        if cold[0]["first"] is not None:
            oldest = min(oldest, int(cold[0]["first"]))
    cursors: list[JsonValue] = [
        {**row, "lag": max(0, next_offset - int(row["offset"]))}
        for row in tables.rows(
            "SELECT consumer, offset, committed_at FROM durability_log_cursors ORDER BY consumer"
        )
    ]
    return {
        "oldest_offset": oldest,
        "hot_offset": hot_offset,
        "next_offset": next_offset,
        "hot_records": int(hot["n"]),
        "hot_bytes": int(seq[0]["total_bytes"]),
        "cursors": cursors,
        "leases": _leases(tables),
    }


def _leases(tables: Tables) -> list[JsonValue]:
    if not tables.has("durability_log_leases"):
        return []
    return [
        dict(row)
        for row in tables.rows(
            "SELECT consumer, batch_id, first_offset, last_offset, state, attempt, expires_at "
            "FROM durability_log_leases WHERE state IN ('active', 'pending') "
            "ORDER BY consumer, first_offset LIMIT ?",
            DETAIL_ROWS,
        )
    ]


FANOUT_DETAILS_QUERY = (
    "SELECT id, target_id, phase, attempt, next_attempt_at, last_error_name, "
    "last_error FROM durability_fanout_deliveries ORDER BY phase, next_attempt_at, id LIMIT ?"
)
"""The oldest deliveries, dead letters first ('dead_letter' sorts before 'delivery'), by
the index on (phase, next_attempt_at) instead of a sort of the whole table."""


def fanout(tables: Tables) -> JsonValue:
    """Fanout deliveries still owed (backlog) and dead letters, with the oldest of each."""
    if not tables.has("durability_fanout_deliveries"):
        return None
    counts = {
        row["phase"]: row["n"]
        for row in tables.rows(
            "SELECT phase, COUNT(*) AS n FROM durability_fanout_deliveries GROUP BY phase"
        )
    }
    details = [
        dict(row)
        for row in tables.rows(
            FANOUT_DETAILS_QUERY,
            DETAIL_ROWS,
        )
    ]
    return {
        "backlog": counts.get("delivery", 0),
        "dead_letters": counts.get("dead_letter", 0),
        "deliveries": details,
    }


COUNT_CAP = 10_000
"""Rows of one of the object's own tables (or its KV keys) counted at most: a count at
the cap means at least that many, and a huge table costs no full scan."""

_NOT_THE_OBJECTS = ("durability_", "_durability_", "sqlite_", "_cf_")
"""Prefixes of the tables the library, the runtime, SQLite and Cloudflare keep."""


def storage(tables: Tables) -> JsonValue:
    """The object's own data beside the capabilities': `tables`, each of its own SQL
    tables with its row count, and `kv_keys`, the keys of its KV storage (both counted
    up to `COUNT_CAP`)."""
    own = sorted(name for name in tables.names if not name.startswith(_NOT_THE_OBJECTS))
    kv_keys = _count(tables, "_durability_kv") if tables.has("_durability_kv") else 0
    return {"tables": {name: _count(tables, name) for name in own}, "kv_keys": kv_keys}


def _count(tables: Tables, name: str) -> int:
    quoted = '"' + name.replace('"', '""') + '"'
    query = f"SELECT COUNT(*) AS n FROM (SELECT 1 FROM {quoted} LIMIT {COUNT_CAP})"
    return int(tables.rows(query)[0]["n"])


SECTIONS: tuple[tuple[str, Callable[[Tables], JsonValue]], ...] = (
    ("operations", operation_counts),
    ("operation_details", operation_details),
    ("named_alarms", named_alarms),
    ("log", log),
    ("fanout", fanout),
    ("storage", storage),
    ("workflows", workflows),
)
"""Report keys and their readers, in report order."""
