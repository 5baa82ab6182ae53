"""The fanout's fenced claims and removals on real storage: rows of several attempts in
one call, more rows than one statement names, stale rows left alone, and manifests
released by how many of their deliveries one call removed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from conftest import MakeRuntime
from durability import LATEST
from durability._engine.migrations import migrate
from durability._fanout.fenced import ROWS_PER_STATEMENT, claim_rows, remove_rows
from durability._fanout.rows import Delivery
from durability._fanout.schema import FANOUT_MIGRATIONS
from durability.runtime import DurableObject, ObjectStub

LEASE_UNTIL = 9_000
MAX_ATTEMPTS = 5


def _row(key: str, target: str, attempt: int, generation: str) -> Delivery:
    """The `Delivery` a pass would have read for the stored row of `key` and `target`."""
    return Delivery(
        id=f"{key}/{target}",
        message_key=key,
        target=target,
        phase="delivery",
        attempt=attempt,
        last_error=None,
        last_error_name=None,
        generation=generation,
        dead_lettered_at=None,
        dead_letter_reason=None,
        message_id=key,
        payload="{}",
        enqueued_at=0,
        message_generation=generation,
        claim_alone=None,
        interruptions=0,
        spared=0,
    )


class FencedLab(DurableObject):
    """Stores fanout rows as given, and runs the fenced writes on its own storage."""

    async def store(self, rows: list[list[Any]], targets: dict[str, int]) -> None:
        """Store delivery rows `[key, target, attempt, generation]` and one manifest per
        key, owed by `targets[key]` targets, at the generation of its first row."""
        migrate(self.ctx.storage, "fanout", FANOUT_MIGRATIONS, LATEST)
        sql = self.ctx.storage.sql
        generations: dict[str, str] = {}
        for key, target, attempt, generation in rows:
            generations.setdefault(key, generation)
            sql.exec(
                "INSERT INTO durability_fanout_deliveries (id, message_key, target_id, seq, "
                "status, phase, attempt, next_attempt_at, created_at, generation_id) "
                "VALUES (?, ?, ?, 0, 'pending', 'delivery', ?, 0, 0, ?)",
                f"{key}/{target}",
                key,
                target,
                attempt,
                generation,
            )
        for key, generation in generations.items():
            sql.exec(
                "INSERT INTO durability_fanout_messages (key, id, payload, targets, remaining, "
                "seq, created_at, generation_id) VALUES (?, ?, '{}', '[]', ?, 0, 0, ?)",
                key,
                key,
                targets[key],
                generation,
            )

    async def claim(self, rows: list[list[Any]]) -> list[list[Any]]:
        """`claim_rows` of rows read as `[key, target, attempt, generation]`; the claimed
        ones as `[id, attempt]`, in the order returned."""
        read = [_row(*row) for row in rows]
        claimed = claim_rows(self.ctx.storage.sql, read, MAX_ATTEMPTS, LEASE_UNTIL)
        return [[row.id, row.attempt] for row in claimed]

    async def remove(self, rows: list[list[Any]]) -> list[str]:
        """`remove_rows` of rows read as `[key, target, attempt, generation]`; the ids
        removed, sorted."""
        read = [_row(*row) for row in rows]
        return sorted(remove_rows(self.ctx.storage.sql, read))

    async def deliveries(self) -> dict[str, list[Any]]:
        """Every stored delivery: id -> `[attempt, next_attempt_at, claim_alone]`."""
        rows = self.ctx.storage.sql.exec(
            "SELECT id, attempt, next_attempt_at, claim_alone FROM durability_fanout_deliveries"
        ).raw()
        return {row[0]: list(row[1:]) for row in rows}

    async def manifests(self) -> dict[str, int]:
        """Every stored manifest: key -> the targets still owing it."""
        rows = self.ctx.storage.sql.exec(
            "SELECT key, remaining FROM durability_fanout_messages"
        ).raw()
        return {row[0]: row[1] for row in rows}


@pytest.fixture
async def lab(make_runtime: MakeRuntime) -> AsyncIterator[ObjectStub]:
    async with make_runtime(path=None, bindings={"LAB": FencedLab}) as rt:
        yield rt.env.LAB.get_by_name("lab")


def _keys(count: int, prefix: str) -> list[str]:
    return [f"{prefix}{number:03}" for number in range(count)]


async def test_a_claim_takes_rows_of_every_attempt_beyond_one_statement(lab: ObjectStub) -> None:
    """Rows of three attempts, one of them more than a statement names, are each claimed
    at their own attempt, in the order read; a row stored at another generation or
    attempt than was read, or out of attempts, is left alone."""
    first: list[list[Any]] = [[key, "t", 0, "g"] for key in _keys(ROWS_PER_STATEMENT + 2, "a")]
    retried: list[list[Any]] = [[key, "t", 1, "g"] for key in _keys(5, "b")]
    later: list[list[Any]] = [[key, "t", 3, "g"] for key in _keys(3, "c")]
    stored = first[:3] + retried[:2] + later + first[3:] + retried[2:]
    stale = [["s0", "t", 0, "new"], ["s1", "t", 2, "g"], ["s2", "t", MAX_ATTEMPTS, "g"]]
    counts = {row[0]: 1 for row in stored + stale}
    await lab.store(stored + stale, counts)
    read = [*stored, ["s0", "t", 0, "old"], ["s1", "t", 1, "g"], ["s2", "t", MAX_ATTEMPTS, "g"]]

    claimed = await lab.claim(read)

    assert claimed == [[f"{key}/t", attempt + 1] for key, _, attempt, _ in stored]
    rows = await lab.deliveries()
    for key, _, attempt, _ in stored:
        assert rows[f"{key}/t"] == [attempt + 1, LEASE_UNTIL, 0]
    assert rows["s0/t"] == [0, 0, None]
    assert rows["s1/t"] == [2, 0, None]
    assert rows["s2/t"] == [MAX_ATTEMPTS, 0, None]


async def test_a_removal_releases_each_manifest_by_the_deliveries_it_removed(
    lab: ObjectStub,
) -> None:
    """Removing both deliveries of a message in one call frees its manifest; removing one
    of two lowers it to one; more manifests than a statement names are all released; a
    delivery stored at another attempt or generation than was read stays, and so does
    its manifest's count."""
    both = _keys(ROWS_PER_STATEMENT + 3, "a")
    one = _keys(ROWS_PER_STATEMENT + 1, "b")
    stored = [[key, target, 1, "g"] for key in both + one for target in ("x", "y")]
    stored += [["s0", "x", 1, "g"], ["s1", "x", 1, "new"]]
    counts = {key: 2 for key in both + one} | {"s0": 1, "s1": 1}
    await lab.store(stored, counts)
    read = [[key, target, 1, "g"] for key in both for target in ("x", "y")]
    read += [[key, "x", 1, "g"] for key in one]
    read += [["s0", "x", 2, "g"], ["s1", "x", 1, "old"]]

    removed = await lab.remove(read)

    expected = [f"{key}/{target}" for key in both for target in ("x", "y")]
    expected += [f"{key}/x" for key in one]
    assert removed == sorted(expected)
    assert sorted(await lab.deliveries()) == sorted([f"{key}/y" for key in one] + ["s0/x", "s1/x"])
    assert await lab.manifests() == {key: 1 for key in one} | {"s0": 1, "s1": 1}


def test_a_claimed_row_differs_from_the_read_one_in_its_claim_fields_only() -> None:
    read = _row("k", "t", 2, "g")._replace(last_error="boom", dead_letter_reason="explicit")
    assert read.claimed(3, 1, 4, 5) == read._replace(
        attempt=3, claim_alone=1, spared=4, interruptions=5
    )
