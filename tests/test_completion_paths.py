"""A batch of completions (one statement returning the ids it completed, or chunks
counted instead) gives each attempt the outcome completing it alone would: won when its
generation and attempt still hold the pending record, lost otherwise."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from conftest import START_MS
from durability import Durability, DurableCall
from durability._operations.completions import complete_calls
from durability.runtime import DurableObject, Runtime
from durability.testing import VirtualClock

NOT_JSON = "not JSON"
"""A result the object turns into a set (stub arguments are JSON already)."""


class Completions(DurableObject):
    """A `Durability` (for its table) whose records the test writes and completes directly."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.durability = Durability(context=ctx, handlers={"work": self._work})

    def _work(self, call: DurableCall[Any]) -> None:
        return None

    async def complete(self, stored: list[list[Any]], done: list[list[Any]], alone: bool) -> Any:
        """Store `(id, generation, attempt, status)` records, then complete the
        `(id, generation, attempt, result)` attempts in one call or one call each; the
        outcomes and the records after."""
        sql = self.ctx.storage.sql
        engine = self.durability._engine
        for key, generation, attempt, status in stored:
            sql.exec(
                "INSERT INTO durability_calls (id, operation, payload, status, attempt, "
                "next_attempt_at, generation_id, created_at, completed_at) "
                "VALUES (?, 'work', 'null', ?, ?, ?, ?, ?, ?)",
                key,
                status,
                attempt,
                START_MS,
                generation,
                START_MS,
                # A record completed already was completed at the batch's own time.
                START_MS + 5 if status == "completed" else None,
            )
        attempts = [
            (
                SimpleNamespace(kind=SimpleNamespace(name="work"), key=key, generation=generation),
                attempt,
                {1, 2} if result == NOT_JSON else result,
            )
            for key, generation, attempt, result in done
        ]
        if alone:
            outcomes = [complete_calls(engine, [one], START_MS + 5)[0] for one in attempts]  # type: ignore[list-item]
        else:
            outcomes = complete_calls(engine, attempts, START_MS + 5)  # type: ignore[arg-type]
        names = [o if o is None or isinstance(o, int) else type(o).__name__ for o in outcomes]
        rows = sql.exec(
            "SELECT id, status, attempt, result, completed_at FROM durability_calls ORDER BY id"
        ).raw()
        return [names, [list(row) for row in rows]]


def _pending(count: int) -> list[list[Any]]:
    return [[f"r{n:02}", f"g{n}", 1, "pending"] for n in range(count)]


def _attempts(count: int, result: Any = None) -> list[list[Any]]:
    return [[f"r{n:02}", f"g{n}", 1, result] for n in range(count)]


CASES = {
    "every attempt wins": (_pending(6), _attempts(6)),
    "every attempt wins, results differ": (_pending(6), [[*a[:3], a[0]] for a in _attempts(6)]),
    "some lost: another generation, another attempt, cancelled, missing": (
        [
            *_pending(3),
            ["r03", "newer", 1, "pending"],
            ["r04", "g4", 2, "pending"],
            ["r05", "g5", 1, "cancelled"],
        ],
        _attempts(7),
    ),
    "some completed already, at the same time, by another attempt or generation": (
        [
            *_pending(4),
            ["r04", "g4", 2, "completed"],
            ["r05", "older", 1, "completed"],
        ],
        _attempts(6),
    ),
    "every attempt lost": ([[f"r{n:02}", "newer", 1, "pending"] for n in range(5)], _attempts(5)),
    "more rows than one statement takes, some lost": (
        [*_pending(30), ["r30", "other", 1, "pending"]],
        _attempts(31, {"ok": True}),
    ),
    "alike results over three statements, some lost in the last": (
        [*_pending(66), ["r66", "newer", 1, "pending"], *_pending(70)[67:]],
        _attempts(70),
    ),
    "results that differ over three statements, some lost": (
        [*_pending(20), ["r20", "newer", 1, "pending"], *_pending(40)[21:]],
        [[*a[:3], a[0]] for a in _attempts(40)],
    ),
    "a result that is not JSON among them": (
        _pending(5),
        [*_attempts(2), ["r02", "g2", 1, NOT_JSON], *_attempts(5)[3:]],
    ),
    "below the counted size": ([*_pending(2), ["r02", "newer", 1, "pending"]], _attempts(3)),
    "counted chunks, some completed already at the same time or lost": (
        [
            *_pending(20),
            ["r20", "g20", 2, "completed"],
            ["r21", "older", 1, "completed"],
            ["r22", "newer", 1, "pending"],
            *[[f"r{n:02}", f"g{n}", 1, "pending"] for n in range(23, 40)],
        ],
        _attempts(40),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_a_batch_completion_matches_completing_each_alone(case: str) -> None:
    stored, done = CASES[case]
    results = []
    for alone in (False, True):
        rt = Runtime(bindings={"C": Completions}, clock=VirtualClock(start_ms=START_MS))
        await rt.start()
        try:
            results.append(await rt.env.C.get_by_name(f"c-{alone}").complete(stored, done, alone))
        finally:
            await rt.close()
    batched, one_by_one = results
    assert batched == one_by_one
    assert any(outcome == START_MS + 5 for outcome in batched[0]) == (case != "every attempt lost")
