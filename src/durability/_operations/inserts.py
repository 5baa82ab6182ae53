"""The multi-row INSERT of new operation records (a turn's registrations), and each
row's outcome: inserted, already this operation's, or another operation's.

Rows are written 16 to a statement, or 32 when they share their operation, due time and
creation time (as a turn's registrations of one operation usually do), those three
bound once. Chunks of at least `COUNTED_ROWS` rows are counted with ``changes()``
instead of returning their ids.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain

from .._context import SqlStorage
from .._engine import padded_bindings, value_rows
from .._errors import DuplicateDurableCallError

Registration = tuple[str, str, str, int, str, int]
"""A new record: id, operation, payload text, due time, generation, creation time."""

_INSERT_CHUNK = 16
"""Rows one INSERT names at most (6 bindings each, under the 100 a query may have)."""
_ALIKE_CHUNK = 32
"""Rows one INSERT names at most when they share their operation, due time and creation
time, as a turn's registrations of one operation usually do (3 bindings each, and 3 for
the statement: 99)."""

_INSERT = (
    "INSERT INTO durability_calls (id, operation, payload, status, attempt, next_attempt_at, "
    "generation_id, created_at, claim_alone) SELECT column1, column2, column3, 'pending', "
    "{attempt}, column4, column5, column6, {claim} FROM (VALUES {rows}) "
    "WHERE column1 IS NOT NULL ON CONFLICT(id) DO NOTHING{returning}"
)
"""The insert of new records: `attempt` 0 and no claim, or 1 and `claim_alone` for
records inserted with their first attempt claimed (what a claim of a new record would
leave)."""

_INSERT_ALIKE = (
    "INSERT INTO durability_calls (id, operation, payload, status, attempt, next_attempt_at, "
    "generation_id, created_at, claim_alone) SELECT column1, ?, column2, 'pending', "
    "{attempt}, ?, column3, ?, {claim} FROM (VALUES {rows}) "
    "WHERE column1 IS NOT NULL ON CONFLICT(id) DO NOTHING{returning}"
)
"""`_INSERT` for rows sharing their operation, due time and creation time (bound once,
before the rows: their marks come first in the text)."""

COUNTED_ROWS = 4
"""Chunks of at least this many rows are inserted or completed without ``RETURNING`` and
counted with ``changes()``: one small statement costs less than a returned row each."""


NONE_CLAIMED: Mapping[int, int] = {}
"""The claims of a write without claims."""


def _one_claim(rows: Sequence[Registration], claimed: Mapping[int, int]) -> bool:
    """Whether every row of `rows` is inserted with the same claim."""
    if not claimed:
        return True
    return len(claimed) == len(rows) and len(set(claimed.values())) == 1


def one_statement(rows: Sequence[Registration], claimed: Mapping[int, int]) -> bool:
    """Whether `insert_calls` writes `rows` (claimed as `claimed` says) with one statement,
    which is atomic by itself (more need a savepoint around them)."""
    if len(rows) > _ALIKE_CHUNK or not _one_claim(rows, claimed):
        return False
    return len(rows) <= _INSERT_CHUNK or len(set(map(_SHARED, rows))) == 1


_SHARED: Callable[[Registration], tuple[str, int, int]] = operator.itemgetter(1, 3, 5)
"""What a turn's registrations of one operation usually share: the operation, due time
and creation time (the bindings an alike insert names once)."""
_OWN: Callable[[Registration], tuple[str, str, str]] = operator.itemgetter(0, 2, 4)
"""A registration's own bindings in an alike insert: id, payload text, generation."""


def insert_calls(
    sql: SqlStorage, rows: Sequence[Registration], claimed: Mapping[int, int] = NONE_CLAIMED
) -> list[bool | Exception]:
    """Insert `rows`, those at the positions `claimed` names with their first attempt
    claimed (with that `claim_alone`: 0 beside others, 1 alone, 2 ahead of its permit);
    per row True (inserted), False (the id is this operation's already) or
    `DuplicateDurableCallError` (it is another operation's).

    A claimed row is the first of its id in `rows`, so writing the claimed rows before
    the others gives every row the outcome writing them in order would. Each row's
    generation is fresh (a registration's is random): a statement that inserted only
    some of its rows tells which by the generations stored."""
    groups: dict[int | None, list[Registration]]
    if not claimed:
        groups = {None: list(rows)}
    elif _one_claim(rows, claimed):
        groups = {next(iter(claimed.values())): list(rows)}
    else:
        groups = {}
        for index, row in enumerate(rows):
            groups.setdefault(claimed.get(index), []).append(row)
        others = groups.pop(None, None)
        if others is not None:
            groups[None] = others  # after the claimed rows
    inserted: set[str] = set()
    for claim, group in groups.items():
        alike = set(map(_SHARED, group))
        shared = alike.pop() if len(alike) == 1 else None
        chunk = _INSERT_CHUNK if shared is None else _ALIKE_CHUNK
        for first in range(0, len(group), chunk):
            inserted.update(_insert_chunk(sql, claim, group[first : first + chunk], shared))
    if len(inserted) == len(rows):
        return [True] * len(rows)  # every row inserted its own id
    outcomes: list[bool | Exception] = []
    for row in rows:
        key = row[0]
        if key in inserted:
            inserted.discard(key)  # a later registration of the id in this batch is not new
            outcomes.append(True)
            continue
        operation = _operation_of(sql, key)
        if operation is None:
            outcomes.append(RuntimeError(f'Durable call "{key}" was not persisted'))
        elif operation != row[1]:
            outcomes.append(DuplicateDurableCallError(key, operation, row[1]))
        else:
            outcomes.append(False)
    return outcomes


def _insert_chunk(
    sql: SqlStorage,
    claim: int | None,
    chunk: Sequence[Registration],
    shared: tuple[str, int, int] | None,
) -> Iterable[str]:
    """Insert the rows of one statement, claimed as `claim` says (`None`: not claimed, else
    its `claim_alone`); the ids they inserted. `shared`: what every row of `chunk` shares
    (`_SHARED`, bound once), or `None`."""
    alike = shared is not None
    if shared is None:
        size, bindings = padded_bindings(chunk, 6)
    else:
        size, bindings = padded_bindings(list(map(_OWN, chunk)), 3)
        bindings[0:0] = shared
    if len(chunk) < COUNTED_ROWS:
        # Each returned row is the 1-tuple of an inserted id.
        cursor = sql.exec(_insert_query(claim, size, True, alike), *bindings)
        return chain.from_iterable(cursor.raw())
    sql.exec(_insert_query(claim, size, False, alike), *bindings)
    # Nothing else runs on the connection between these synchronous statements, and
    # changes() counts the INSERT's own rows (not a trigger's).
    try:
        for (count,) in sql.exec("SELECT changes()").raw():
            if count == len(chunk):
                return [row[0] for row in chunk]
            if count == 0:
                return ()
        return _written_by(sql, chunk)
    except Exception as error:
        raise ReadAfterInsertError(error) from error


class ReadAfterInsertError(Exception):
    """A read after a chunk's insert failed: the rows are written already, so a retry
    row by row would find them; the batch fails whole instead."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _written_by(sql: SqlStorage, chunk: Sequence[Registration]) -> list[str]:
    """The ids of `chunk` whose stored record one of its rows wrote: each registration has
    a fresh random generation, so the stored generation tells which row wrote a record."""
    written = {(row[0], row[4]) for row in chunk}
    stored = sql.exec(_stored_query(len(chunk)), *(row[0] for row in chunk)).raw()
    return [key for key, generation in stored if (key, generation) in written]


@functools.cache
def _insert_query(claim: int | None, size: int, returning: bool, alike: bool) -> str:
    """`_INSERT` (`_INSERT_ALIKE` when `alike`) for `size` rows claimed as `claim` says,
    returning their ids or not (a few distinct texts)."""
    ending = " RETURNING id" if returning else ""
    return (_INSERT_ALIKE if alike else _INSERT).format(
        attempt=0 if claim is None else 1,
        claim="NULL" if claim is None else claim,
        rows=value_rows(3 if alike else 6, size),
        returning=ending,
    )


@functools.cache
def _stored_query(size: int) -> str:
    """The id and generation of the records of `size` ids."""
    marks = ", ".join("?" * size)
    return f"SELECT id, generation_id FROM durability_calls WHERE id IN ({marks})"


def _operation_of(sql: SqlStorage, key: str) -> str | None:
    """The stored operation of record `key`, or `None` when there is none."""
    for row in sql.exec("SELECT operation FROM durability_calls WHERE id = ?", key).raw():
        return str(row[0])
    return None
