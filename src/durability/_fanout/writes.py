"""The registration of enqueued messages: their manifests and delivery rows, many per
statement.

It runs inside one transaction of the caller, its statements chunked to stay under the
Workers limit of 100 bound parameters per statement.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from json.encoder import encode_basestring
from typing import NamedTuple, TypeVar

from .._context import SqlStorage
from .._errors import FanoutEnqueueError
from .._serialization import to_json_text
from .._types import SqlValue
from .._uuid import fresh_generation
from .engine import value_rows
from .rows import NewMessage, Registered

Item = TypeVar("Item")

MAX_PARAMETERS = 96
"""Bound parameters per statement (the Workers SQL API accepts at most 100)."""


def _chunks(items: Sequence[Item], width: int) -> Iterator[Sequence[Item]]:
    """`items` in slices whose rows of `width` parameters fit in one statement."""
    size = max(1, MAX_PARAMETERS // width)
    for start in range(0, len(items), size):
        yield items[start : start + size]


class Registration(NamedTuple):
    """One enqueue's checked entries, its sorted targets and its timestamps."""

    entries: Sequence[NewMessage]
    targets: tuple[str, ...]
    now: int
    first_attempt_at: int


@functools.lru_cache(maxsize=64)
def _targets_text(targets: tuple[str, ...]) -> str:
    """The stored JSON text of a target set (most enqueues name the same few sets)."""
    return to_json_text(list(targets))


@functools.cache
def _insert_manifests_statement(size: int) -> str:
    """The insertion of `size` manifests, each skipped if its key is stored; the keys
    inserted."""
    return (
        "INSERT INTO durability_fanout_messages (key, id, payload, targets, remaining, "
        f"seq, created_at, generation_id) VALUES {value_rows(8, size)} "
        "ON CONFLICT(key) DO NOTHING RETURNING key"
    )


TARGETS_PER_STATEMENT = 16
"""Targets one delivery insertion names at most (2 bindings each)."""


@functools.cache
def _insert_deliveries_statement(messages: int, targets: int) -> str:
    """The insertion of a delivery row for each of `messages` new messages and each of
    `targets` targets (bindings: each target and its JSON-quoted text, then each
    message's key, quoted key, sequence, due time, creation time and generation).

    The row id, `["<key>","<target>"]`, is joined from the quoted texts, so a message's
    values are bound once for all its targets; the messages are read as they are joined
    (`NOT MATERIALIZED`, first in the `CROSS JOIN`), only the targets go to a temporary
    table. No ON CONFLICT: a delivery row left without its manifest is a broken
    invariant, and the constraint error rolls the whole enqueue back."""
    return (
        f"WITH t(target, quoted) AS (VALUES {value_rows(2, targets)}), "
        "m(key, quoted, seq, due, created, generation) AS NOT MATERIALIZED "
        f"(VALUES {value_rows(6, messages)}) "
        "INSERT INTO durability_fanout_deliveries (id, message_key, target_id, seq, "
        "next_attempt_at, created_at, generation_id, status, phase, attempt) "
        "SELECT '[' || m.quoted || ',' || t.quoted || ']', m.key, t.target, m.seq, m.due, "
        "m.created, m.generation, 'pending', 'delivery', 0 FROM m CROSS JOIN t"
    )


def register_rows(sql: SqlStorage, requests: Sequence[Registration]) -> list[list[Registered]]:
    """Insert a manifest and one delivery per target for each new entry of each request,
    in order; the new entries of each request.

    A stored key (or one repeated earlier) with the same id, body and targets is
    skipped; with different ones `FanoutEnqueueError` is raised (the caller's
    transaction then rolls everything back).
    """
    count = sum(len(request.entries) for request in requests)
    # Reserved for every entry up front; a skipped duplicate leaves a harmless gap.
    end = int(
        next(
            sql.exec(
                "UPDATE durability_fanout_seq SET next_seq = next_seq + ? WHERE id = 1 "
                "RETURNING next_seq",
                count,
            ).raw()
        )[0]
    )
    items: list[tuple[Registration, NewMessage, str, int, str]] = []
    seq = end - count
    for request in requests:
        targets_text = _targets_text(request.targets)
        for entry in request.entries:
            items.append((request, entry, targets_text, seq, fresh_generation()))
            seq += 1
    fresh: dict[int, list[Registered]] = {id(request): [] for request in requests}
    new_rows: list[tuple[Registration, Registered, int]] = []
    seen: set[str] = set()
    for chunk in _chunks(items, 8):
        bindings: list[SqlValue] = []
        for request, entry, targets_text, seq, generation in chunk:
            bindings += [entry.key, entry.id, entry.payload, targets_text]
            bindings += [len(request.targets), seq, request.now, generation]
        inserted = {
            str(row[0])
            for row in sql.exec(_insert_manifests_statement(len(chunk)), *bindings).raw()
        }
        for request, entry, targets_text, seq, generation in chunk:
            if entry.key in inserted and entry.key not in seen:
                seen.add(entry.key)
                registered = Registered(entry, generation)
                fresh[id(request)].append(registered)
                new_rows.append((request, registered, seq))
            else:
                _check_duplicate(sql, entry, targets_text)
    _insert_deliveries(sql, new_rows)
    return [fresh[id(request)] for request in requests]


def _check_duplicate(sql: SqlStorage, entry: NewMessage, targets_text: str) -> None:
    """Accept a stored key only for the very same work."""
    stored = next(
        sql.exec(
            "SELECT id, payload, targets FROM durability_fanout_messages WHERE key = ?", entry.key
        ).raw()
    )
    if tuple(stored) != (entry.id, entry.payload, targets_text):
        raise FanoutEnqueueError(
            f'Deduplication key "{entry.key}" already identifies different work'
        )


def _insert_deliveries(
    sql: SqlStorage, new_rows: Sequence[tuple[Registration, Registered, int]]
) -> None:
    """Insert the delivery rows of each new entry (request, entry, sequence): one per
    target of its request, the entries of one target set together."""
    by_targets: dict[tuple[str, ...], list[SqlValue]] = {}
    for request, (entry, generation), seq in new_rows:
        values = by_targets.setdefault(request.targets, [])
        values += [entry.key, encode_basestring(entry.key), seq, request.first_attempt_at]
        values += [request.now, generation]
    for targets, values in by_targets.items():
        for first in range(0, len(targets), TARGETS_PER_STATEMENT):
            chunk = targets[first : first + TARGETS_PER_STATEMENT]
            shared: list[SqlValue] = []
            for target in chunk:
                shared += [target, encode_basestring(target)]
            step = 6 * ((MAX_PARAMETERS - len(shared)) // 6)
            for start in range(0, len(values), step):
                part = values[start : start + step]
                statement = _insert_deliveries_statement(len(part) // 6, len(chunk))
                sql.exec(statement, *shared, *part)
