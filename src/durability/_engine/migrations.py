"""Versioned schema migrations per capability, with a shared history table.

Each capability (operations, named alarms, fanout, log, log leases) owns an ordered
list of `Migration`s. `migrate` moves one capability's schema up, down or to an exact
version inside one `storage.transaction_sync`, so a failure leaves the schema as it
was. The history table `durability_migrations` is shared by every capability and keeps,
for each applied migration, its capability and its `down` statements, so an older
version of this library can revert (at most two) migrations it does not know.

The capabilities' migration lists live in `schemas`. Stored `down` scripts are JSON
arrays of SQL statements: `sql.exec` runs one statement at a time on the embedded
runtime, so a list is the form every host can replay.

The 0004 rebuilds stamp old rows with the migration time. That time is read from the
history row the runner writes just before a migration's `up` statements (its
`applied_at`, taken from the runtime clock), so the SQL text stays constant and a
virtual clock is honoured.
"""

from __future__ import annotations

import enum
import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal, TypeAlias

from .._clock import now_ms
from .._context import SqlStorage, Storage

HISTORY_TABLE: Final = "durability_migrations"
"""The history table shared by every capability, named as the TypeScript library names
it, so both libraries read one database."""

MAX_FUTURE_MIGRATIONS: Final = 2
"""How many unknown (newer) migrations `migrate` reverts through their stored downs."""

_LEGACY_COMBINED_0004: Final = "durability_0004_generation_and_created_at"
CALLS_0004: Final = "durability_0004_calls_generation_and_created_at"
ALARMS_0004: Final = "durability_0004_alarms_generation_and_created_at"
"""The two halves `_LEGACY_COMBINED_0004` was split into (the runner translates it)."""


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: `up` statements, and `down` statements that exactly reverse them."""

    name: str
    up: tuple[str, ...]
    down: tuple[str, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("Migration name must be a non-empty string")
        for field in ("up", "down"):
            statements = getattr(self, field)
            if not isinstance(statements, tuple) or not all(
                isinstance(statement, str) and statement.strip() for statement in statements
            ):
                raise TypeError(
                    f'Migration "{self.name}" {field} must be a tuple of non-empty SQL strings'
                )


class _Latest(enum.Enum):
    """The type of `LATEST`: "the newest migration this code knows" (None means none)."""

    LATEST = "LATEST"

    def __repr__(self) -> str:
        return "LATEST"


LATEST: Final = _Latest.LATEST
"""Default `migrate` target: the last migration of the list."""

MigrationTarget: TypeAlias = str | Literal[_Latest.LATEST] | None
"""What `migrate(target=...)` accepts: `LATEST`, a migration name, or `None` for none."""


@dataclass(frozen=True, slots=True)
class MigrationResult:
    """What `migrate` changed.

    `applied` lists the migrations run up, in list order; `rolled_back` lists the
    unknown (future) migrations reverted, newest first, then the known ones reverted,
    newest first.
    """

    applied: tuple[str, ...]
    rolled_back: tuple[str, ...]


def migrate(
    storage: Storage,
    capability: str,
    migrations: Sequence[Migration],
    target: MigrationTarget = LATEST,
) -> MigrationResult:
    """Move `capability`'s schema to `target` atomically and return what changed.

    `LATEST` applies every migration; `None` reverts them all (dropping the
    capability's tables and rows); a migration name moves exactly to that version.
    """
    steps = _check_migrations(capability, migrations)
    target_index = _resolve_target(steps, target)
    return storage.transaction_sync(lambda: _migrate(storage.sql, capability, steps, target_index))


def has_history(sql: SqlStorage) -> bool:
    """Whether the migration history table exists: emptying the object drops it, and
    reverting the last capability's last migration."""
    found = sql.exec(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", HISTORY_TABLE
    ).raw()
    return next(found, None) is not None


def is_schema_current(sql: SqlStorage, capability: str, migrations: Sequence[Migration]) -> bool:
    """True when every migration of the list, and nothing else, is applied with its down.

    Reads only; a helper calls `migrate` when this is False.
    """
    steps = _check_migrations(capability, migrations)
    if not {"capability", "down"} <= _history_columns(sql):
        return not steps
    stored = {
        row["name"]: row["down"]
        for row in sql.exec(
            f"SELECT name, down FROM {HISTORY_TABLE} WHERE capability = ?", capability
        )
    }
    expected = {step.name: _encode_down(step) for step in steps}
    return stored == expected


def _check_migrations(capability: str, migrations: Sequence[Migration]) -> tuple[Migration, ...]:
    if not isinstance(capability, str):
        raise TypeError(f"capability must be a string, got {type(capability).__name__}")
    if not capability:
        raise ValueError("capability must be a non-empty string")
    steps = tuple(migrations)
    names: set[str] = set()
    for step in steps:
        if not isinstance(step, Migration):
            raise TypeError(f"migrations must hold Migration values, got {type(step).__name__}")
        if step.name in names:
            raise ValueError(f'migrations must have unique names; "{step.name}" repeats')
        names.add(step.name)
    return steps


def _resolve_target(steps: tuple[Migration, ...], target: object) -> int:
    """Index of the last migration to keep applied; -1 means none."""
    if target is LATEST:
        return len(steps) - 1
    if target is None:
        return -1
    if not isinstance(target, str):
        raise TypeError(
            f"target must be a migration name, None or LATEST, got {type(target).__name__}"
        )
    for index, step in enumerate(steps):
        if step.name == target:
            return index
    raise ValueError(f'Unknown durability migration target "{target}"')


def _migrate(
    sql: SqlStorage, capability: str, steps: tuple[Migration, ...], target_index: int
) -> MigrationResult:
    _ensure_history_table(sql)
    _translate_legacy_history(sql)
    known = {step.name for step in steps}
    if known:
        placeholders = ", ".join("?" for _ in known)
        sql.exec(
            f"UPDATE {HISTORY_TABLE} SET capability = ? "
            f"WHERE capability IS NULL AND name IN ({placeholders})",
            capability,
            *sorted(known),
        )
    history = sql.exec(
        f"SELECT name, down FROM {HISTORY_TABLE} WHERE capability = ? ORDER BY id", capability
    ).to_list()
    future = [row for row in history if row["name"] not in known]
    reverted_future = _revert_future(sql, capability, future)
    stored = {row["name"]: row["down"] for row in history if row["name"] in known}

    keep = steps[: target_index + 1]
    to_revert = [step for step in reversed(steps[target_index + 1 :]) if step.name in stored]
    to_apply = [step for step in keep if step.name not in stored]
    to_refresh = [
        step for step in keep if step.name in stored and stored[step.name] != _encode_down(step)
    ]

    for step in to_revert:
        _run(sql, step.down)
        sql.exec(f"DELETE FROM {HISTORY_TABLE} WHERE name = ?", step.name)
    for step in to_apply:
        sql.exec(
            f"INSERT INTO {HISTORY_TABLE} (name, applied_at, capability, down) VALUES (?, ?, ?, ?)",
            step.name,
            _timestamp_text(now_ms()),
            capability,
            _encode_down(step),
        )
        _run(sql, step.up)
    for step in to_refresh:
        sql.exec(
            f"UPDATE {HISTORY_TABLE} SET down = ? WHERE name = ?", _encode_down(step), step.name
        )

    if sql.exec(f"SELECT COUNT(*) AS n FROM {HISTORY_TABLE}").one()["n"] == 0:
        sql.exec(f"DROP TABLE {HISTORY_TABLE}")
    return MigrationResult(
        applied=tuple(step.name for step in to_apply),
        rolled_back=(*reverted_future, *(step.name for step in to_revert)),
    )


def _history_columns(sql: SqlStorage) -> set[str]:
    return {row["name"] for row in sql.exec(f"PRAGMA table_info({HISTORY_TABLE})")}


def _ensure_history_table(sql: SqlStorage) -> None:
    """Create the history table in its oldest shape, then add the v3 columns if missing."""
    sql.exec(
        f"CREATE TABLE IF NOT EXISTS {HISTORY_TABLE} ("
        "id INTEGER PRIMARY KEY AUTOINCREMENT, "
        "name TEXT NOT NULL UNIQUE, "
        "applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)"
    )
    columns = _history_columns(sql)
    for column in ("capability", "down"):
        if column not in columns:
            sql.exec(f"ALTER TABLE {HISTORY_TABLE} ADD COLUMN {column} TEXT")


def _translate_legacy_history(sql: SqlStorage) -> None:
    """Split the v2 combined 0004 row into its two per-capability halves.

    The combined row stays, so a rollback to the v2 library still sees its history.
    """
    for half in (CALLS_0004, ALARMS_0004):
        sql.exec(
            f"INSERT INTO {HISTORY_TABLE} (name, applied_at) "
            f"SELECT ?, applied_at FROM {HISTORY_TABLE} WHERE name = ? "
            f"AND NOT EXISTS (SELECT 1 FROM {HISTORY_TABLE} WHERE name = ?)",
            half,
            _LEGACY_COMBINED_0004,
            half,
        )


def _revert_future(sql: SqlStorage, capability: str, future: list[dict[str, object]]) -> list[str]:
    """Run the stored downs of migrations newer than this code, newest first."""
    if len(future) > MAX_FUTURE_MIGRATIONS:
        raise RuntimeError(
            f"Durability {capability} schema is {len(future)} migrations ahead of this "
            f"version; refusing to revert more than {MAX_FUTURE_MIGRATIONS}"
        )
    reverted: list[str] = []
    for row in reversed(future):
        name = str(row["name"])
        _run(sql, _decode_down(name, row["down"]))
        sql.exec(f"DELETE FROM {HISTORY_TABLE} WHERE name = ?", name)
        reverted.append(name)
    return reverted


def _run(sql: SqlStorage, statements: Sequence[str]) -> None:
    for statement in statements:
        sql.exec(statement)


@functools.lru_cache(maxsize=256)
def _encode_down(step: Migration) -> str:
    return json.dumps(list(step.down), separators=(",", ":"))


def _decode_down(name: str, stored: object) -> list[str]:
    if stored is None or stored == "":
        raise RuntimeError(f'Migration "{name}" has no stored down script')
    try:
        statements = json.loads(str(stored))
    except ValueError:
        statements = None
    if not isinstance(statements, list) or not all(isinstance(s, str) for s in statements):
        raise RuntimeError(
            f'Migration "{name}" has a stored down script that is not a JSON array of statements'
        )
    return statements


def _timestamp_text(ms: int) -> str:
    """`ms` as SQLite's UTC timestamp text with milliseconds (what `applied_at` holds)."""
    seconds, millis = divmod(ms, 1000)
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%d %H:%M:%S") + f".{millis:03d}"


def migration_time_ms(name: str) -> str:
    """SQL for the ms timestamp of migration `name`, read from its history row."""
    return (
        "(SELECT CAST(round((julianday(applied_at) - 2440587.5) * 86400000.0) AS INTEGER) "
        f"FROM {HISTORY_TABLE} WHERE name = '{name}')"
    )
