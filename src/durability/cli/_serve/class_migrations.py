"""wrangler's `migrations`, applied to a project's local state as `wrangler dev` does.

Objects are stored per binding (`PATH/<BINDING>/`), while Cloudflare keeps them per
class. So the state folder records which class each binding's folder holds and which
migration tags were applied (`PATH/_migrations.json`). Each new tag is applied in
order: `renamed_classes` makes the folders of the old class belong to the new one,
`deleted_classes` deletes the objects of the class (its folders and their alarms).
A class still bound that a migration deletes or renames away is an error, as is a
binding whose folder holds another class's objects, or `transferred_classes` (from
another script): nothing is deleted or moved silently.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["MigrationError", "MigrationPlan", "Migrations", "parse_migrations"]

LEDGER = "_migrations.json"
"""The file in the state folder recording the applied tags and each folder's class."""


class MigrationError(ValueError):
    """The migrations are malformed, or cannot be applied to the local state."""


@dataclass(frozen=True)
class Migration:
    """One entry of `migrations`."""

    tag: str
    new: tuple[str, ...] = ()
    new_sqlite: tuple[str, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()
    deleted: tuple[str, ...] = ()


@dataclass(frozen=True)
class Migrations:
    """A project's migrations, in order."""

    steps: tuple[Migration, ...] = ()
    notes: list[str] = field(default_factory=list)

    def check_bindings(self, bindings: dict[str, str], where: str) -> None:
        """Raise `MigrationError` for a bound class the migrations delete or rename away."""
        for name, class_name in bindings.items():
            for step in self.steps:
                if class_name in step.deleted:
                    raise MigrationError(
                        f"{where}: migration {step.tag!r} deletes class {class_name!r}, "
                        f"which binding {name!r} still names"
                    )
                for old, new in step.renamed:
                    if class_name == old and new != old:
                        raise MigrationError(
                            f"{where}: migration {step.tag!r} renames class {old!r} to "
                            f"{new!r}; binding {name!r} must name {new!r}"
                        )

    def apply(self, state: Path, bindings: dict[str, str]) -> list[str]:
        """Apply the tags not yet applied to the state folder; what was done, one line
        each. Raises `MigrationError` (and changes nothing) when a binding's folder
        holds objects of a class other than the one it now names."""
        plan = self.plan(state, bindings)
        for binding in plan.doomed:
            _delete_objects(state, binding)
        state.mkdir(parents=True, exist_ok=True)
        ledger = {"tags": plan.tags, "classes": plan.classes}
        (state / LEDGER).write_text(json.dumps(ledger, indent=2))
        return plan.done

    def plan(self, state: Path, bindings: dict[str, str]) -> MigrationPlan:
        """What `apply` would do to the state folder, changing nothing (`MigrationError`
        where `apply` would refuse)."""
        ledger = _read(state / LEDGER)
        applied: list[str] = list(ledger.get("tags", []))
        held: dict[str, str] = dict(ledger.get("classes", {}))
        done: list[str] = []
        doomed: list[str] = []
        for step in self.steps:
            if step.tag in applied:
                continue
            for old, new in step.renamed:
                for binding, class_name in held.items():
                    if class_name == old:
                        held[binding] = new
                        done.append(f"migration {step.tag}: {binding}'s objects are {new}'s")
            for class_name in step.deleted:
                for binding in [b for b, c in held.items() if c == class_name]:
                    doomed.append(binding)
                    del held[binding]
                    done.append(f"migration {step.tag}: deleted {class_name}'s objects")
            applied.append(step.tag)
        for binding, class_name in bindings.items():
            previous = held.get(binding)
            if previous is not None and previous != class_name and (state / binding).is_dir():
                raise MigrationError(
                    f"binding {binding!r} names class {class_name!r}, but {state / binding} "
                    f"holds objects of class {previous!r} and no migration renames it: add "
                    "a `renamed_classes` migration, or move that folder away"
                )
            held[binding] = class_name
        return MigrationPlan(applied, held, done, doomed)


@dataclass(frozen=True)
class MigrationPlan:
    """What applying the migrations does: the tags applied after it, each binding's class,
    one line per change, and the bindings whose objects it deletes."""

    tags: list[str]
    classes: dict[str, str]
    done: list[str]
    doomed: list[str]


def parse_migrations(value: object, where: str) -> Migrations:
    """The `migrations` list of a config; `MigrationError` names the malformed entry."""
    if value is None:
        return Migrations()
    if not isinstance(value, list):
        raise MigrationError(f"{where}: `migrations` must be a list")
    steps: list[Migration] = []
    notes: list[str] = []
    for index, entry in enumerate(value):
        what = f"{where}: migrations[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("tag"), str):
            raise MigrationError(f"{what} must be an object with a `tag`")
        if entry.get("transferred_classes"):
            raise MigrationError(
                f"{what}: `transferred_classes` moves objects from another script, which "
                "durability serve cannot read"
            )
        renamed = entry.get("renamed_classes", [])
        if not isinstance(renamed, list) or not all(
            isinstance(r, dict) and isinstance(r.get("from"), str) and isinstance(r.get("to"), str)
            for r in renamed
        ):
            raise MigrationError(f"{what}: `renamed_classes` must list {{from, to}} objects")
        step = Migration(
            tag=entry["tag"],
            new=_names(entry, "new_classes", what),
            new_sqlite=_names(entry, "new_sqlite_classes", what),
            renamed=tuple((r["from"], r["to"]) for r in renamed),
            deleted=_names(entry, "deleted_classes", what),
        )
        if step.new:
            notes.append(f"new_classes ({', '.join(step.new)}: served SQLite-backed)")
        steps.append(step)
    return Migrations(tuple(steps), notes)


def _names(entry: dict[str, Any], key: str, what: str) -> tuple[str, ...]:
    names = entry.get(key, [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise MigrationError(f"{what}: `{key}` must be a list of class names")
    return tuple(names)


def _read(file: Path) -> dict[str, Any]:
    if not file.is_file():
        return {}
    try:
        ledger = json.loads(file.read_text())
    except ValueError as error:
        raise MigrationError(f"{file} is not valid JSON ({error}); fix or remove it") from None
    if not isinstance(ledger, dict):
        raise MigrationError(f"{file} must hold a JSON object; fix or remove it")
    return ledger


def _delete_objects(state: Path, binding: str) -> None:
    """Delete a binding's object files and their alarm catalog entries."""
    folder = state / binding
    if folder.is_dir():
        shutil.rmtree(folder)
    catalog = state / "_catalog.sqlite3"
    if catalog.is_file():
        connection = sqlite3.connect(catalog)
        try:
            with connection:
                connection.execute("DELETE FROM alarms WHERE namespace = ?", (binding,))
        finally:
            connection.close()
