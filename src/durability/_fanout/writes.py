"""The set-based writes of the fanout: register, claim and remove many rows per statement.

Each runs inside one transaction of the caller. Claims and removals match each row on
(id, generation, attempt), joined on the primary key, so a row that changed since it
was read is left alone and the caller learns (RETURNING) which rows were written.
Statements are chunked to stay under the Workers limit of 100 bound parameters per
statement; settlement statements are padded to a few row counts (`padded`), so SQLite
compiles few distinct texts.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import NamedTuple, TypeVar

from .._context import SqlStorage
from .._errors import FanoutEnqueueError
from .._serialization import to_json_text
from .._types import SqlValue
from .._uuid import fresh_generation
from .engine import MAX_BATCH_ROWS, padded_bindings, value_rows
from .rows import Delivery, NewMessage, Registered, json_pair

Item = TypeVar("Item")

MAX_PARAMETERS = 96
"""Bound parameters per statement (the Workers SQL API accepts at most 100)."""

ROWS_PER_STATEMENT = MAX_BATCH_ROWS
"""Rows one settlement statement names at most (3 bindings each, plus at most 2 more)."""


def _chunks(items: Sequence[Item], width: int) -> Iterator[Sequence[Item]]:
    """`items` in slices whose rows of `width` parameters fit in one statement."""
    size = max(1, MAX_PARAMETERS // width)
    for start in range(0, len(items), size):
        yield items[start : start + size]


_CLAIM_ONE = (
    "UPDATE durability_fanout_deliveries SET attempt = attempt + 1, next_attempt_at = ?, "
    "claim_alone = ? WHERE id = ? AND +generation_id = ? AND +attempt = ? "
    "AND +phase = 'delivery' AND attempt - spared < ? AND claim_alone IS NULL RETURNING id"
)
"""The claim of one fenced row (bindings: lease end, alone, id, generation, attempt, limit).

A single row gets statements of its own without a join: a join, or an `IN` subquery,
builds a temporary table, and building one for every `ack()` of a message makes the
allocator grow and shrink the heap each time (half the CPU of that load, in the kernel)."""

_REMOVE_ONE = (
    "DELETE FROM durability_fanout_deliveries "
    "WHERE id = ? AND +generation_id = ? AND +attempt = ? RETURNING id"
)
"""The deletion of one fenced row (bindings: id, generation, attempt)."""

_RELEASE_ONE = (
    "UPDATE durability_fanout_messages SET remaining = remaining - ? "
    "WHERE key = ? AND +generation_id = ? RETURNING key, remaining"
)
"""The release of one manifest (bindings: count, key, generation)."""


@functools.cache
def _claim_statement(size: int) -> str:
    """The claim of `size` fenced rows: a join on the primary key, one lookup per row.

    The unary `+` keeps SQLite on the primary key (the due index holds `attempt`, which
    the statement writes: without it the update leaves its one-pass path)."""
    return (
        f"WITH c(k, g, a) AS (VALUES {value_rows(3, size)}) "
        "UPDATE durability_fanout_deliveries AS d SET attempt = d.attempt + 1, "
        "next_attempt_at = ?, claim_alone = ? FROM c WHERE d.id = c.k "
        "AND +d.generation_id = c.g AND +d.attempt = c.a AND +d.phase = 'delivery' "
        "AND d.attempt - d.spared < ? AND d.claim_alone IS NULL RETURNING id"
    )


@functools.cache
def _remove_statement(size: int) -> str:
    """The deletion of `size` fenced rows (DELETE has no join: the fenced rows are
    found by primary key in a subquery, then deleted by rowid)."""
    return (
        f"WITH c(k, g, a) AS (VALUES {value_rows(3, size)}) "
        "DELETE FROM durability_fanout_deliveries WHERE rowid IN (SELECT d.rowid FROM c "
        "JOIN durability_fanout_deliveries AS d ON d.id = c.k AND +d.generation_id = c.g "
        "AND +d.attempt = c.a) RETURNING id"
    )


@functools.cache
def _release_statement(size: int) -> str:
    """Release `size` manifests, each by its count at its generation; each one's count left."""
    return (
        f"WITH r(k, g, n) AS (VALUES {value_rows(3, size)}) "
        "UPDATE durability_fanout_messages AS m SET remaining = m.remaining - r.n FROM r "
        "WHERE m.key = r.k AND +m.generation_id = r.g RETURNING key, remaining"
    )


@functools.cache
def _delete_manifests_statement(size: int) -> str:
    """The deletion of `size` manifests by key."""
    marks = ", ".join("?" * size)
    return f"DELETE FROM durability_fanout_messages WHERE key IN ({marks})"


class Registration(NamedTuple):
    """One enqueue's checked entries, its sorted targets and its timestamps."""

    entries: Sequence[NewMessage]
    targets: Sequence[str]
    now: int
    first_attempt_at: int


@functools.cache
def _insert_manifests_statement(size: int) -> str:
    """The insertion of `size` manifests, each skipped if its key is stored; the keys
    inserted."""
    return (
        "INSERT INTO durability_fanout_messages (key, id, payload, targets, remaining, "
        f"seq, created_at, generation_id) VALUES {value_rows(8, size)} "
        "ON CONFLICT(key) DO NOTHING RETURNING key"
    )


@functools.cache
def _insert_deliveries_statement(size: int) -> str:
    """The insertion of `size` new delivery rows.

    No ON CONFLICT: a delivery row left without its manifest is a broken invariant, and
    the constraint error rolls the whole enqueue back."""
    return (
        "INSERT INTO durability_fanout_deliveries (id, message_key, target_id, seq, "
        "next_attempt_at, created_at, generation_id, status, phase, attempt) VALUES "
        + ", ".join(["(?, ?, ?, ?, ?, ?, ?, 'pending', 'delivery', 0)"] * size)
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
        targets_text = to_json_text(list(request.targets))
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
    rows = [(request, new, seq, t) for request, new, seq in new_rows for t in request.targets]
    for chunk_rows in _chunks(rows, 7):
        bindings = []
        for request, (entry, generation), seq, target in chunk_rows:
            key = entry.key
            bindings += [json_pair(key, target), key, target, seq, request.first_attempt_at]
            bindings += [request.now, generation]
        sql.exec(_insert_deliveries_statement(len(chunk_rows)), *bindings)
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


def claim_rows(
    sql: SqlStorage,
    rows: Sequence[Delivery],
    max_attempts: int,
    lease_until: int,
    alone: bool = False,
) -> list[Delivery]:
    """Count one more attempt of each row still as read (and within its limit), leased
    until `lease_until`, run `alone` or beside others; the claimed rows, in order."""
    won: set[str] = set()
    claim = 1 if alone else 0
    for first in range(0, len(rows), ROWS_PER_STATEMENT):
        chunk = rows[first : first + ROWS_PER_STATEMENT]
        bindings: list[SqlValue]
        if len(chunk) == 1:
            row = chunk[0]
            query = _CLAIM_ONE
            bindings = [lease_until, claim, row.id, row.generation, row.attempt, max_attempts]
        else:
            size, bindings = padded_bindings([(r.id, r.generation, r.attempt) for r in chunk], 3)
            query = _claim_statement(size)
            bindings += [lease_until, claim, max_attempts]
        won.update(str(found[0]) for found in sql.exec(query, *bindings).raw())
    return [
        row.claimed(row.attempt + 1, claim, row.spared, row.interruptions)
        for row in rows
        if row.id in won
    ]


def claim_suspect_row(sql: SqlStorage, row: Delivery, lease_until: int) -> Delivery | None:
    """Claim, to run alone, a row whose last claimed attempt never settled (the process
    stopped or the object was evicted while it was delivered): that interruption is
    counted, and spared when that attempt ran beside others. `None` if the row changed
    since it was read. The caller checks the attempt limit first."""
    written = sql.exec(
        "UPDATE durability_fanout_deliveries SET attempt = attempt + 1, next_attempt_at = ?, "
        "spared = spared + 1 - claim_alone, claim_alone = 1, "
        "interruptions = interruptions + 1 WHERE id = ? AND generation_id = ? "
        "AND attempt = ? AND phase = 'delivery' AND claim_alone IS NOT NULL",
        lease_until,
        row.id,
        row.generation,
        row.attempt,
    ).rows_written
    if not written:
        return None
    assert row.claim_alone is not None
    spared = row.spared + 1 - row.claim_alone
    return row.claimed(row.attempt + 1, 1, spared, row.interruptions + 1)


def remove_rows(sql: SqlStorage, rows: Sequence[Delivery]) -> set[str]:
    """Delete each row still at its attempt and release the manifests; the removed ids."""
    removed: set[str] = set()
    for first in range(0, len(rows), ROWS_PER_STATEMENT):
        chunk = rows[first : first + ROWS_PER_STATEMENT]
        size, bindings = padded_bindings([(r.id, r.generation, r.attempt) for r in chunk], 3)
        query = _REMOVE_ONE if size == 1 else _remove_statement(size)
        removed.update(str(found[0]) for found in sql.exec(query, *bindings).raw())
    releases = Counter((row.message_key, row.generation) for row in rows if row.id in removed)
    manifests = [(key, generation, count) for (key, generation), count in releases.items()]
    finished: list[SqlValue] = []
    for first in range(0, len(manifests), ROWS_PER_STATEMENT):
        group = manifests[first : first + ROWS_PER_STATEMENT]
        if len(group) == 1:
            key, generation, count = group[0]
            released = sql.exec(_RELEASE_ONE, count, key, generation).raw()
        else:
            size, bindings = padded_bindings(group, 3)
            released = sql.exec(_release_statement(size), *bindings).raw()
        finished += [key for key, left in released if left <= 0]
    # Only a manifest no target owes any more is deleted (by key: this very transaction
    # just matched its generation).
    for first in range(0, len(finished), ROWS_PER_STATEMENT):
        size, keys = padded_bindings(
            [[key] for key in finished[first : first + ROWS_PER_STATEMENT]], 1
        )
        sql.exec(_delete_manifests_statement(size), *keys)
    return removed
