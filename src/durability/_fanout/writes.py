"""The set-based writes of the fanout: register, claim and remove many rows per statement.

Each runs inside one transaction of the caller. Rows are matched on (id, generation,
attempt) row values, so a row that changed since it was read is left alone and the
caller learns which rows were written. Statements are chunked to stay under the
Workers limit of 100 bound parameters per statement.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from .._context import SqlStorage
from .._errors import FanoutEnqueueError
from .._serialization import to_json_text
from .._types import SqlValue
from .rows import Delivery, NewMessage, Registered, json_pair, random_id

Item = TypeVar("Item")

MAX_PARAMETERS = 96
"""Bound parameters per statement (the Workers SQL API accepts at most 100)."""


def _chunks(items: Sequence[Item], width: int) -> Iterator[Sequence[Item]]:
    """`items` in slices whose rows of `width` parameters fit in one statement."""
    size = max(1, MAX_PARAMETERS // width)
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _values(count: int, width: int) -> str:
    """`VALUES (?, ?), (?, ?)` for `count` rows of `width` parameters."""
    row = "(" + ", ".join("?" * width) + ")"
    return "VALUES " + ", ".join([row] * count)


def _fenced(count: int) -> str:
    """The WHERE clause matching `count` pending rows on (id, generation, attempt).

    The plain `id IN` list is what lets SQLite look rows up by key (a row-value IN
    alone is answered with a table scan); the unary `+` on the other columns keeps an
    UPDATE of indexed columns on that one-pass path (without it, 40 times slower).
    """
    marks = ", ".join("?" * count)
    return (
        f"id IN ({marks}) AND (id, generation_id, attempt) IN ({_values(count, 3)}) "
        "AND +status = 'pending'"
    )


def _fence_bindings(rows: Sequence[Delivery]) -> list[SqlValue]:
    """The bindings of `_fenced(len(rows))`."""
    bindings: list[SqlValue] = [row.id for row in rows]
    for row in rows:
        bindings += [row.id, row.generation, row.attempt]
    return bindings


@dataclass(frozen=True, slots=True)
class Registration:
    """One enqueue's checked entries, its sorted targets and its timestamps."""

    entries: Sequence[NewMessage]
    targets: Sequence[str]
    now: int
    first_attempt_at: int


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
    items = [
        (request, entry, to_json_text(list(request.targets)))
        for request in requests
        for entry in request.entries
    ]
    first_seq = end - count
    fresh: dict[int, list[Registered]] = {id(request): [] for request in requests}
    new_rows: list[tuple[Registration, Registered, int]] = []
    seen: set[str] = set()
    for offset, chunk in _offset_chunks(items, 8):
        bindings: list[SqlValue] = []
        generations: list[str] = []
        for seq, (request, entry, targets_text) in enumerate(chunk, first_seq + offset):
            generation = random_id()
            generations.append(generation)
            bindings += [entry.key, entry.id, entry.payload, targets_text]
            bindings += [len(request.targets), seq, request.now, generation]
        inserted = {
            str(row[0])
            for row in sql.exec(
                "INSERT INTO durability_fanout_messages (key, id, payload, targets, remaining, "
                f"seq, created_at, generation_id) {_values(len(chunk), 8)} "
                "ON CONFLICT(key) DO NOTHING RETURNING key",
                *bindings,
            ).raw()
        }
        for seq, ((request, entry, targets_text), generation) in enumerate(
            zip(chunk, generations, strict=True), first_seq + offset
        ):
            if entry.key in inserted and entry.key not in seen:
                seen.add(entry.key)
                registered = Registered(entry, generation)
                fresh[id(request)].append(registered)
                new_rows.append((request, registered, seq))
            else:
                _check_duplicate(sql, entry, targets_text)
    rows = [(request, new, seq, t) for request, new, seq in new_rows for t in request.targets]
    for chunk_rows in _chunks(rows, 7):
        bindings = []
        for request, registered, seq, target in chunk_rows:
            key = registered.entry.key
            bindings += [json_pair(key, target), key, target, seq, request.first_attempt_at]
            bindings += [request.now, registered.generation]
        # No ON CONFLICT: a delivery row left without its manifest is a broken invariant,
        # and the constraint error rolls the whole enqueue back.
        sql.exec(
            "INSERT INTO durability_fanout_deliveries (id, message_key, target_id, seq, "
            "next_attempt_at, created_at, generation_id, status, phase, attempt) VALUES "
            + ", ".join(["(?, ?, ?, ?, ?, ?, ?, 'pending', 'delivery', 0)"] * len(chunk_rows)),
            *bindings,
        )
    return [fresh[id(request)] for request in requests]


def _offset_chunks(items: Sequence[Item], width: int) -> Iterator[tuple[int, Sequence[Item]]]:
    """`_chunks` with the offset of each chunk's first item."""
    size = max(1, MAX_PARAMETERS // width)
    for start in range(0, len(items), size):
        yield start, items[start : start + size]


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


def claim_rows(
    sql: SqlStorage, rows: Sequence[Delivery], max_attempts: int, lease_until: int
) -> list[Delivery]:
    """Count one more attempt of each row still as read; the claimed rows, in order."""
    won: set[str] = set()
    for chunk in _chunks(rows, 4):
        cursor = sql.exec(
            "UPDATE durability_fanout_deliveries SET attempt = attempt + 1, next_attempt_at = ? "
            f"WHERE {_fenced(len(chunk))} AND +phase = 'delivery' AND +attempt < ? RETURNING id",
            lease_until,
            *_fence_bindings(chunk),
            max_attempts,
        )
        won.update(str(found[0]) for found in cursor.raw())
    return [row.claimed(row.attempt + 1) for row in rows if row.id in won]


def remove_rows(sql: SqlStorage, rows: Sequence[Delivery]) -> set[str]:
    """Delete each row still at its attempt and release the manifests; the removed ids."""
    removed: set[str] = set()
    for chunk in _chunks(rows, 4):
        cursor = sql.exec(
            f"DELETE FROM durability_fanout_deliveries WHERE {_fenced(len(chunk))} RETURNING id",
            *_fence_bindings(chunk),
        )
        removed.update(str(found[0]) for found in cursor.raw())
    releases = Counter((row.message_key, row.generation) for row in rows if row.id in removed)
    by_count: dict[int, list[tuple[str, str]]] = {}
    for manifest, count in releases.items():
        by_count.setdefault(count, []).append(manifest)
    for count, manifests in by_count.items():
        for group in _chunks(manifests, 3):
            marks = ", ".join("?" * len(group))
            where = f"key IN ({marks}) AND (key, generation_id) IN ({_values(len(group), 2)})"
            keys: list[SqlValue] = [key for key, _ in group]
            keys += [value for manifest in group for value in manifest]
            released = sql.exec(
                f"UPDATE durability_fanout_messages SET remaining = remaining - ? WHERE {where} "
                "RETURNING key, remaining",
                count,
                *keys,
            )
            finished: list[SqlValue] = [key for key, left in released.raw() if left <= 0]
            # Only a manifest no target owes any more is deleted (by key: this very
            # transaction just matched its generation).
            for done in _chunks(finished, 1):
                marks = ", ".join("?" * len(done))
                sql.exec(f"DELETE FROM durability_fanout_messages WHERE key IN ({marks})", *done)
    return removed
