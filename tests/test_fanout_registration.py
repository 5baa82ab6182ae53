"""The delivery rows a registration writes: one per message and target, whatever the
number of targets and of target sets in one turn, each with the id, sequence, times and
generation of its message."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from conftest import MakeRuntime
from durability import DurabilityFanout, FanoutInput, FanoutTarget
from durability.runtime import DurableObject, ObjectStub

TARGETS = [f"t{number:02}" for number in range(20)]
WINDOW_MS = 3_600_000
"""The batch delay: nothing is delivered while the test reads the rows."""


class Registrar(DurableObject):
    """A fanout to many targets whose deliveries wait for the next hour."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.fanout: DurabilityFanout[Any] = DurabilityFanout(
            context=ctx,
            targets={name: FanoutTarget(deliver=lambda messages: None) for name in TARGETS},
            batch_delay_ms=WINDOW_MS,
        )

    async def enqueue_together(self, calls: list[list[Any]]) -> list[bool]:
        """Enqueue each `[keys, targets or None]` in one turn; whether each succeeded."""
        results = await asyncio.gather(
            *(
                self.fanout.enqueue([FanoutInput(key, id=key) for key in keys], targets)
                for keys, targets in calls
            )
        )
        return [result.success for result in results]

    async def rows(self) -> list[list[Any]]:
        """Every delivery row with its manifest's sequence, time and generation."""
        cursor = self.ctx.storage.sql.exec(
            "SELECT d.id, d.message_key, d.target_id, d.seq, d.next_attempt_at, d.created_at, "
            "d.generation_id, d.status, d.phase, d.attempt, m.seq, m.created_at, "
            "m.generation_id, m.targets, m.remaining FROM durability_fanout_deliveries AS d "
            "JOIN durability_fanout_messages AS m ON m.key = d.message_key ORDER BY d.id"
        )
        return [list(row) for row in cursor.raw()]


@pytest.fixture
async def registrar(make_runtime: MakeRuntime) -> AsyncIterator[ObjectStub]:
    async with make_runtime(path=None, bindings={"R": Registrar}) as rt:
        yield rt.env.R.get_by_name("r")


async def test_one_turn_registers_a_row_per_message_and_target(registrar: ObjectStub) -> None:
    """Messages to all twenty targets (more than one statement names), messages to two
    of them, and a key JSON must escape, enqueued in one turn: each gets one row per
    target, its id the JSON pair of key and target, its times and generation its
    manifest's."""
    every = [f"m{number:02}" for number in range(12)]
    two = ["p0", "p1", "p2"]
    odd = 'q"\\é\n\x01'
    assert await registrar.enqueue_together(
        [[every, None], [two, ["t17", "t03"]], [[odd], None]]
    ) == [True, True, True]

    rows = await registrar.rows()

    expected = sorted(
        [(key, target) for key in [*every, odd] for target in TARGETS]
        + [(key, target) for key in two for target in ("t03", "t17")]
    )
    assert sorted((row[1], row[2]) for row in rows) == expected
    for row in rows:
        key, target = row[1], row[2]
        assert row[0] == json.dumps([key, target], separators=(",", ":"), ensure_ascii=False)
        assert row[3] == row[10] and row[5] == row[11] and row[6] == row[12]
        assert row[4] % WINDOW_MS == 0 and 0 <= row[4] - row[5] < WINDOW_MS
        assert row[7:10] == ["pending", "delivery", 0]
        assert row[14] == len(json.loads(row[13]))
    assert len({row[3] for row in rows}) == len(every) + len(two) + 1
