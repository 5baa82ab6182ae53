"""Registrations past the free permits are claimed by their insert, ahead of their permit:
one commit for the lot, each handler started as a permit comes, and a claim cut off
before it settled is claimed again beside others, spared."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from _lab import note_attempt_on_disk
from durability import Durability, DurableCall
from durability._operations import calls, completions
from durability.runtime import DurableObject, Runtime, _database
from durability.testing import VirtualClock


class Queue(DurableObject):
    """Operations registered together; "held" handlers wait on a gate at their first
    attempt, "work" handlers note what is on disk when they start."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.probe: dict[str, Any] = env["PROBE"]
        self.gate = asyncio.Event()
        self.durability = Durability(
            context=ctx,
            handlers={"work": self._work, "held": self._held},
            alarm_concurrency=self.probe.get("permits", 2),
        )

    def _work(self, call: DurableCall) -> str:
        self.probe.setdefault("ran", []).append((call.id, call.attempt))
        note_attempt_on_disk(self.probe, call.id)
        return call.id

    async def _held(self, call: DurableCall) -> str:
        self.probe.setdefault("ran", []).append((call.id, call.attempt))
        if call.attempt == 1:
            await self.gate.wait()
        return call.id

    async def register(self, calls: list[list[str]]) -> None:
        """Register `(operation, id)` calls in one turn."""
        await asyncio.gather(
            *(self.durability.operation(operation)(id=id) for operation, id in calls)
        )

    async def open_gate(self) -> None:
        self.gate.set()

    async def rows(self) -> dict[str, list[Any]]:
        """Per id: status, attempt, claim_alone, spared, interruptions."""
        found = self.ctx.storage.sql.exec(
            "SELECT id, status, attempt, claim_alone, spared, interruptions "
            "FROM durability_calls ORDER BY id"
        ).raw()
        return {str(row[0]): list(row[1:]) for row in found}

    async def alarm(self, info: Any = None) -> None:
        await self.durability.alarm(info)


async def start(
    clock: VirtualClock, probe: dict[str, Any], path: Path | None = None
) -> tuple[Runtime, Any]:
    rt = Runtime(path=path, bindings={"Q": Queue, "PROBE": probe}, clock=clock)
    await rt.start()
    return rt, rt.env.Q.get_by_name("queue")


async def test_records_past_the_free_permits_are_claimed_by_the_same_commit(
    clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two permits held, three more registrations of the turn are inserted claimed ahead
    of a permit (attempt 1, claim_alone 2) by the one commit of the turn; once the
    permits come back they run in order, with no further commit before they start."""
    probe: dict[str, Any] = {}
    rt, obj = await start(clock, probe)
    try:
        await obj.rows()  # the object is built, its tables made
        commits = [0]
        ended = _database.Database.transaction_ended

        def counting(
            database: _database.Database, transaction: asyncio.Future[None], wrote: bool = True
        ) -> None:
            commits[0] += 1
            ended(database, transaction, wrote)

        monkeypatch.setattr(_database.Database, "transaction_ended", counting)
        await obj.register([["held", "a"], ["held", "b"], ["work", "c"], ["work", "d"]])
        await obj.register([["work", "e"]])
        await clock.run_until_idle()
        assert commits[0] == 2
        rows = await obj.rows()
        assert {id: rows[id][:3] for id in "abcde"} == {
            "a": ["pending", 1, 0],
            "b": ["pending", 1, 0],
            "c": ["pending", 1, 2],
            "d": ["pending", 1, 2],
            "e": ["pending", 1, 2],
        }
        assert probe["ran"] == [("a", 1), ("b", 1)]
        commits[0] = 0
        await obj.open_gate()
        await clock.run_until_idle()
        assert probe["ran"][2:] == [("c", 1), ("d", 1), ("e", 1)]
        assert {id: row[:2] for id, row in (await obj.rows()).items()} == {
            id: ["completed", 1] for id in "abcde"
        }
    finally:
        await rt.close()


async def test_a_queued_claim_is_durable_before_its_handler_starts(
    clock: VirtualClock, tmp_path: Path
) -> None:
    """The claim a record's insert made ahead of its permit is on disk (read by another
    connection) when its handler starts."""
    probe: dict[str, Any] = {"permits": 1}
    rt, obj = await start(clock, probe, tmp_path)
    try:
        await obj.register([["work", "warm-up"]])
        await clock.run_until_idle()
        [probe["file"]] = [str(path) for path in tmp_path.glob("Q/*.sqlite3")]
        await obj.register([["held", "a"], ["work", "b"], ["work", "c"]])
        await obj.open_gate()
        await clock.run_until_idle()
        assert probe["on_disk"] == {"b": 1, "c": 1}
    finally:
        await rt.close()


async def test_a_queued_claim_cut_off_is_claimed_again_beside_others_and_spared(
    clock: VirtualClock,
) -> None:
    """Evicted while waiting for a permit, a claimed record never settled; the next
    instance claims it again with the other due rows (not alone, as a suspect is): its
    attempt grows to 2, the lost one spared and counted as interrupted, so it keeps all
    its attempts. The attempts cut off while running beside others run alone."""
    probe: dict[str, Any] = {}
    rt, obj = await start(clock, probe)
    try:
        await obj.register([["held", "a"], ["held", "b"], ["work", "c"], ["work", "d"]])
        await clock.run_until_idle()
        assert probe["ran"] == [("a", 1), ("b", 1)]
        await rt.evict(obj)
        await clock.advance(15_000)
        assert sorted(probe["ran"][2:]) == [("a", 2), ("b", 2), ("c", 2), ("d", 2)]
        # The queued claims ran in the pass's batch, before the suspects ran alone.
        assert {id for id, _ in probe["ran"][2:4]} == {"c", "d"}
        rows = await obj.rows()
        assert rows["c"] == ["completed", 2, 0, 1, 1]
        assert rows["d"] == ["completed", 2, 0, 1, 1]
        assert rows["a"] == ["completed", 2, 1, 1, 1]
    finally:
        await rt.close()


async def test_handlers_that_do_not_await_pass_their_permit_on_within_one_batch(
    clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With one permit, queued calls whose handlers return without awaiting run one after
    another on that permit in one batch, their results stored together; a handler that
    awaits keeps its permit, so the call after it waits for it."""
    stored: list[int] = []
    complete = completions.complete_calls

    def counting(engine: Any, done: Any, completed_at: int) -> Any:
        stored.append(len(done))
        return complete(engine, done, completed_at)

    monkeypatch.setattr(calls, "complete_calls", counting)
    probe: dict[str, Any] = {"permits": 1}
    rt, obj = await start(clock, probe)
    try:
        await obj.register([["work", f"w{number:02}"] for number in range(20)])
        await clock.run_until_idle()
        assert probe["ran"] == [(f"w{number:02}", 1) for number in range(20)]
        # The first, claimed with the free permit, runs first in the queue's batch and
        # hands its permit on: the twenty successes are stored together.
        assert stored == [20]
        probe["ran"].clear()
        await obj.register([["work", "a"], ["held", "b"], ["work", "c"]])
        await clock.run_until_idle()
        assert probe["ran"] == [("a", 1), ("b", 1)]
        await obj.open_gate()
        await clock.run_until_idle()
        assert probe["ran"] == [("a", 1), ("b", 1), ("c", 1)]
        assert {row[0] for row in (await obj.rows()).values()} == {"completed"}
    finally:
        await rt.close()
