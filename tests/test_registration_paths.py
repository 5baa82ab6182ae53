"""The shortcuts of a registration batch's insert give each row the outcome, and leave
the rows, that writing the rows one at a time in order would."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from conftest import START_MS
from durability import Durability, DurableCall
from durability._operations import inserts as operation_batch
from durability._operations.inserts import Registration, insert_calls
from durability.runtime import DurableObject, Runtime
from durability.testing import VirtualClock


class Inserts(DurableObject):
    """A `Durability` (for its tables) whose records the test inserts directly."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.durability = Durability(
            context=ctx, handlers={"work": self._work, "other": self._work}
        )

    def _work(self, call: DurableCall) -> None:
        self.env["RAN"].append(call.id)

    async def register_many(self, calls: list[list[Any]]) -> None:
        """Register `(id, delay_ms)` calls of operation "work" in one turn."""
        work = self.durability.operation("work")
        await asyncio.gather(*(work(id=id, delay_ms=delay_ms) for id, delay_ms in calls))

    async def row(self, id: str) -> list[Any]:
        found = self.ctx.storage.sql.exec(
            "SELECT status, attempt FROM durability_calls WHERE id = ?", id
        ).one()
        return [found["status"], found["attempt"]]

    async def free_permits(self) -> int:
        return int(self.durability._engine.permits.free)

    async def insert(self, rows: list[list[Any]], claimed: list[int], alone: bool) -> list[Any]:
        """Insert `rows` (those at `claimed` claimed) in one call, or each in a call of
        its own; per row its outcome's name, then the stored records."""
        sql = self.ctx.storage.sql
        registrations: list[Registration] = [
            (str(r[0]), str(r[1]), str(r[2]), int(r[3]), str(r[4]), int(r[5])) for r in rows
        ]
        if alone:
            outcomes = [
                insert_calls(sql, [row], {0: 0} if index in claimed else {})[0]
                for index, row in enumerate(registrations)
            ]
        else:
            outcomes = insert_calls(sql, registrations, dict.fromkeys(claimed, 0))
        names = [o if isinstance(o, bool) else type(o).__name__ for o in outcomes]
        stored = sql.exec(
            "SELECT id, operation, payload, attempt, next_attempt_at, generation_id, created_at "
            "FROM durability_calls ORDER BY id"
        ).raw()
        return [names, [list(row) for row in stored]]


def _row(
    id: str,
    operation: str = "work",
    generation: str | None = None,
    payload: str = "null",
    due: int = START_MS,
) -> list[Any]:
    return [id, operation, payload, due, generation or f"g-{id}", START_MS]


CASES = {
    "all new, all claimed": ([_row("a"), _row("b"), _row("c")], [0, 1, 2]),
    "all new, none claimed": ([_row("a"), _row("b"), _row("c")], []),
    "some claimed, repeats and taken ids": (
        [
            _row("a"),
            _row("taken"),
            _row("b"),
            _row("a", generation="g-a2"),
            _row("taken", "other"),
            _row("b", "other"),
        ],
        [0, 2],
    ),
    "all claimed, one id taken": ([_row("a"), _row("taken"), _row("c")], [0, 1, 2]),
    "more rows than one statement names": ([_row(f"r{n:02}") for n in range(40)], []),
    "more claimed rows than one statement names": (
        [_row(f"r{n:02}") for n in range(40)],
        list(range(40)),
    ),
    "counted statements with repeats and taken ids": (
        [_row(f"r{n:02}") for n in range(10)]
        + [_row("taken"), _row("r03", generation="g-r03-again"), _row("taken", "other")]
        + [_row(f"r{n:02}") for n in range(10, 30)]
        + [_row("r12", "other", generation="g-r12-again")],
        [],
    ),
    "a counted statement that inserts nothing": ([_row("taken", "other")] * 5, []),
    "alike rows over three statements, each its own payload, repeats and taken ids": (
        [_row(f"r{n:02}", payload=f'{{"n":{n}}}', due=START_MS + 5) for n in range(40)]
        + [_row("taken", due=START_MS + 5), _row("r07", generation="g-r07-again", due=START_MS + 5)]
        + [_row(f"s{n:02}", payload=f"[{n}]", due=START_MS + 5) for n in range(25)],
        [],
    ),
    "claimed alike rows over three statements beside alike others": (
        [_row(f"r{n:02}", payload=f"{n}") for n in range(70)] + [_row("r69", generation="g-x")],
        list(range(0, 70, 2)),
    ),
    "rows alike but for their due times": (
        [_row(f"r{n:02}", due=START_MS + n % 2) for n in range(40)],
        [],
    ),
    "claimed counted statements beside counted others": (
        [_row(f"r{n:02}") for n in range(20)]
        + [_row("taken"), _row("r05", generation="g-r05-again")]
        + [_row(f"s{n:02}") for n in range(6)],
        list(range(20)),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_a_batch_insert_matches_inserting_each_row_in_order(case: str) -> None:
    rows, claimed = CASES[case]
    results = []
    for alone in (False, True):
        rt = Runtime(bindings={"I": Inserts, "RAN": []}, clock=VirtualClock(start_ms=START_MS))
        await rt.start()
        try:
            obj = rt.env.I.get_by_name(f"inserts-{alone}")
            await obj.insert([_row("taken", generation="g-before")], [], True)
            results.append(await obj.insert(rows, claimed, alone))
        finally:
            await rt.close()
    batched, one_by_one = results
    assert batched == one_by_one


async def test_only_the_first_registration_of_an_id_in_a_turn_can_be_claimed() -> None:
    """A record due now is claimed with its insert only when its row is the first of its
    id in the turn: a delayed first row wins, and the later due one reserves nothing."""
    clock = VirtualClock(start_ms=START_MS)
    ran: list[str] = []
    rt = Runtime(bindings={"I": Inserts, "RAN": ran}, clock=clock)
    await rt.start()
    try:
        obj = rt.env.I.get_by_name("firsts")
        await obj.register_many([["k", 1_000], ["n", None], ["k", None]])
        assert await obj.row("k") == ["pending", 0]
        await clock.run_until_idle()
        assert ran == ["n"]
        assert await obj.free_permits() == 10
        await clock.advance(1_000)
        assert ran == ["n", "k"]
        assert await obj.row("k") == ["completed", 1]
    finally:
        await rt.close()


async def test_a_read_failing_after_a_counted_insert_fails_the_whole_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rows of a counted insert are written before its reads: when a read fails, the
    batch fails whole (every caller gets the error, nothing of it stays), instead of a
    row-by-row retry that would find the batch's own records and report them as old."""

    def failing(sql: Any, chunk: Any) -> list[str]:
        raise OSError("read failed")

    monkeypatch.setattr(operation_batch, "_written_by", failing)
    rt = Runtime(bindings={"I": Inserts, "RAN": []}, clock=VirtualClock(start_ms=START_MS))
    await rt.start()
    try:
        obj = rt.env.I.get_by_name("read-fails")
        await obj.register_many([["taken", None]])
        with pytest.raises(OSError, match="read failed"):
            await obj.register_many([["taken", None]] + [[f"r{n}", None] for n in range(5)])
        stored = await obj.insert([], [], False)
        assert [row[0] for row in stored[1]] == ["taken"]
    finally:
        await rt.close()
