"""Migrations the new code would apply or refuse: the library's schema migrations of each
object (per capability, against the lists this library knows), and a project's wrangler
class migrations against the state folder's ledger."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..._alarms.schema import NAMED_ALARM_MIGRATIONS
from ..._engine.migrations import HISTORY_TABLE, MAX_FUTURE_MIGRATIONS, Migration
from ..._engine.schemas import ERROR_STACK_MIGRATIONS, STACKS_CAPABILITY
from ..._fanout.schema import FANOUT_MIGRATIONS
from ..._log.schema import LOG_LEASE_MIGRATIONS, LOG_MIGRATIONS
from ..._operations.schema import OPERATION_MIGRATIONS
from .._inspect.tables import Tables
from .._serve.class_migrations import MigrationError, Migrations

KNOWN: dict[str, Sequence[Migration]] = {
    "operations": OPERATION_MIGRATIONS,
    "namedAlarms": NAMED_ALARM_MIGRATIONS,
    "fanout": FANOUT_MIGRATIONS,
    "log": LOG_MIGRATIONS,
    "logLeases": LOG_LEASE_MIGRATIONS,
    STACKS_CAPABILITY: ERROR_STACK_MIGRATIONS,
}
"""Each capability's migrations, as this version of the library has them."""


@dataclass(frozen=True, slots=True)
class SchemaChange:
    """What the new code does to one capability's schema in one object: the migrations
    it applies, and those it reverts (newer than it knows) or refuses to revert."""

    capability: str
    applies: tuple[str, ...]
    reverts: tuple[str, ...]
    refuses: bool


def schema_changes(tables: Tables) -> list[SchemaChange]:
    """The schema changes the new code makes to an object, one per capability it holds."""
    if not tables.has(HISTORY_TABLE):
        return []
    columns = {row["name"] for row in tables.rows(f"PRAGMA table_info({HISTORY_TABLE})")}
    capability = "capability" if "capability" in columns else "NULL"
    stored: dict[str, list[str]] = {}
    for row in tables.rows(
        f"SELECT name, {capability} AS capability FROM {HISTORY_TABLE} ORDER BY id"
    ):
        owner = row["capability"] or _owner(str(row["name"]))
        if owner is not None:
            stored.setdefault(owner, []).append(str(row["name"]))
    changes = []
    for owner, names in stored.items():
        if owner not in KNOWN:
            continue
        known = [step.name for step in KNOWN[owner]]
        future = tuple(name for name in names if name not in known)
        applies = tuple(name for name in known if name not in names)
        if future or applies:
            refuses = len(future) > MAX_FUTURE_MIGRATIONS
            changes.append(SchemaChange(owner, applies, future, refuses))
    return changes


def _owner(name: str) -> str | None:
    """The capability a history row without one belongs to (by its migration's name)."""
    return next(
        (owner for owner, steps in KNOWN.items() if any(s.name == name for s in steps)), None
    )


@dataclass(frozen=True, slots=True)
class ClassMigrations:
    """What a project's wrangler migrations would do to the state folder."""

    done: list[str]
    deleted: list[str]
    """Bindings whose objects a migration deletes."""
    refusal: str | None


def class_migrations(
    state: Path, migrations: Migrations, classes: dict[str, str]
) -> ClassMigrations:
    """The class migrations not yet applied to `state`, planned without changing it."""
    try:
        plan = migrations.plan(state, classes)
    except MigrationError as error:
        return ClassMigrations([], [], str(error))
    return ClassMigrations(plan.done, plan.doomed, None)
