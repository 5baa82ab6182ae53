"""Operations batched across records keep every per-record outcome and guarantee."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from _lab import note_attempt_on_disk
from conftest import START_MS
from durability import DuplicateDurableCallError, Durability, DurableCall, OperationResult
from durability.runtime import DurableObject, Runtime
from durability.testing import VirtualClock


class Batches(DurableObject):
    """Operations registered many to a turn; handlers report what they see."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.probe: dict[str, Any] = env["PROBE"]
        self.durability = Durability(
            context=ctx,
            handlers={"work": self._work, "other": self._work, "slow": self._slow},
            alarm_concurrency=self.probe.get("permits", 10),
            on_lifecycle_event=lambda event: self.probe.setdefault("events", []).append(event),
        )

    def _work(self, call: DurableCall) -> Any:
        self.probe.setdefault("ran", []).append(call.id)
        if call.id == "stale-maker":
            # Another generation takes over "stale" after its claim, before it completes.
            self.ctx.storage.sql.exec(
                "UPDATE durability_calls SET generation_id = 'newer' WHERE id = 'stale'"
            )
        if call.id == "unstorable":
            return {1, 2}
        note_attempt_on_disk(self.probe, call.id)
        return call.id

    async def _slow(self, call: DurableCall) -> str:
        self.probe["running"] = self.probe.get("running", 0) + 1
        self.probe["most"] = max(self.probe.get("most", 0), self.probe["running"])
        await asyncio.sleep(1)
        self.probe["running"] -= 1
        return call.id

    async def register_many(self, calls: list[list[Any]]) -> list[str]:
        """Register `(operation, id, payload[, delay_ms])` calls in one turn; each one's
        outcome (a payload of "<set>" is a set, which is not JSON)."""

        async def one(operation: str, id: str, payload: Any, delay_ms: int | None = None) -> str:
            if payload == "<set>":
                payload = {1, 2}
            try:
                await self.durability.operation(operation)(
                    id=id, payload=payload, delay_ms=delay_ms
                )
            except Exception as error:
                return type(error).__name__
            return "ok"

        return list(await asyncio.gather(*(one(*call) for call in calls)))

    async def poison(self, id: str) -> None:
        """Make any insert of record `id` fail in SQL."""
        self.ctx.storage.sql.exec(
            f"CREATE TRIGGER poison BEFORE INSERT ON durability_calls WHEN NEW.id = '{id}' "
            "BEGIN SELECT RAISE(ABORT, 'poisoned'); END"
        )

    async def poison_update(self, id: str, column: str) -> None:
        """Make any update of `column` of record `id` fail in SQL."""
        self.ctx.storage.sql.exec(
            f"CREATE TRIGGER poison_{column} BEFORE UPDATE OF {column} ON durability_calls "
            f"WHEN NEW.id = '{id}' BEGIN SELECT RAISE(ABORT, 'poisoned'); END"
        )

    async def result(self, operation: str, id: str) -> list[Any]:
        """The record's status, result, and error name (if any)."""
        found: OperationResult = await self.durability.operation(operation).get_result(id)
        return [found.status, found.result, None if found.error is None else found.error.name]

    async def stored(self, id: str) -> list[Any]:
        row = self.ctx.storage.sql.exec(
            "SELECT operation, status, generation_id, result FROM durability_calls WHERE id = ?",
            id,
        ).one()
        return [row["operation"], row["status"], row["generation_id"], row["result"]]

    async def alarm(self, info: Any = None) -> None:
        await self.durability.alarm(info)


async def start(probe: dict[str, Any], path: Path | None = None) -> tuple[Runtime, Any, Any]:
    clock = VirtualClock(start_ms=START_MS)
    rt = Runtime(path=path, bindings={"B": Batches, "PROBE": probe}, clock=clock)
    await rt.start()
    return rt, rt.env.B.get_by_name("batches"), clock


async def test_registrations_of_one_turn_each_get_their_own_outcome() -> None:
    """A turn's registrations are written together; each caller gets its own outcome."""
    rt, obj, clock = await start({})
    try:
        assert await obj.register_many([["work", "taken", None]]) == ["ok"]
        outcomes = await obj.register_many(
            [
                ["work", "a", 1],
                ["work", "taken", None],
                ["other", "taken", None],
                ["work", "bad", "<set>"],
                ["work", "b", 2],
                ["work", "a", 3],
                ["other", "a", 4],
            ]
        )
        assert outcomes == [
            "ok",
            "ok",
            "DuplicateDurableCallError",
            "TypeError",
            "ok",
            "ok",
            "DuplicateDurableCallError",
        ]
        await clock.run_until_idle()
        assert (await obj.result("work", "a"))[:2] == ["completed", "a"]
        assert (await obj.result("work", "b"))[0] == "completed"
        assert (await obj.stored("a"))[:2] == ["work", "completed"]
        assert (await obj.result("work", "bad"))[0] == "not_found"
    finally:
        await rt.close()


async def test_a_row_that_spoils_the_batch_insert_fails_alone() -> None:
    """A registration the SQL refuses fails by itself; the rest of its turn is stored."""
    rt, obj, clock = await start({})
    try:
        await obj.poison("poison")
        outcomes = await obj.register_many(
            [["work", "a", None], ["work", "poison", None], ["work", "b", None]]
        )
        assert outcomes[0] == outcomes[2] == "ok"
        assert outcomes[1] != "ok"
        await clock.run_until_idle()
        assert [(await obj.result("work", id))[0] for id in ("a", "poison", "b")] == [
            "completed",
            "not_found",
            "completed",
        ]
    finally:
        await rt.close()


@pytest.mark.parametrize(("permits", "delay_ms"), [(1, None), (40, 1_000)])
async def test_a_spoilt_later_chunk_leaves_the_earlier_rows_reported_new(
    permits: int, delay_ms: int | None
) -> None:
    """A row spoiling a turn's second INSERT (rows alike go 32 to one) leaves the first
    one's rows registered and run: the two ran in one savepoint, undone together before
    the row-by-row retry. Due now, the first row is claimed with its insert (an INSERT
    of its own); due later, none is."""
    probe: dict[str, Any] = {"permits": permits}
    rt, obj, clock = await start(probe)
    try:
        await obj.poison("poison")
        ids = [f"r{number}" for number in range(40)]
        ids[37] = "poison"
        outcomes = await obj.register_many([["work", id, None, delay_ms] for id in ids])
        assert outcomes.count("ok") == 39
        registered = [event.id for event in probe["events"] if event.type == "registered"]
        assert sorted(registered) == sorted(id for id in ids if id != "poison")
        await clock.advance(delay_ms or 0)
        await clock.run_until_idle()
        assert sorted(probe["ran"]) == sorted(registered)
    finally:
        await rt.close()


async def test_a_spoilt_later_completion_chunk_keeps_the_earlier_successes() -> None:
    """A success refused in a batch's second completion statement keeps the first's stored."""
    probe: dict[str, Any] = {"permits": 20}
    rt, obj, clock = await start(probe)
    try:
        await obj.poison_update("poison", "status")
        ids = [f"r{number}" for number in range(20)]
        ids[17] = "poison"
        assert await obj.register_many([["work", id, None] for id in ids]) == ["ok"] * 20
        await clock.run_until_idle()
        completed = [
            event.id
            for event in probe["events"]
            if event.type == "attempt_settled" and event.outcome == "completed"
        ]
        assert sorted(completed) == sorted(id for id in ids if id != "poison")
    finally:
        await rt.close()


async def test_a_spoilt_later_claim_chunk_costs_the_earlier_rows_no_attempt() -> None:
    """A claim refused in a pass's second claim statement costs the first's rows no attempt
    (the records are due later, so the pass claims them, not their inserts)."""
    probe: dict[str, Any] = {"permits": 40}
    rt, obj, clock = await start(probe)
    try:
        await obj.poison_update("poison", "attempt")
        ids = [f"r{number}" for number in range(40)]
        ids[37] = "poison"
        await obj.register_many([["work", id, None, 1_000] for id in ids])
        await clock.advance(1_000)
        await clock.run_until_idle()
        started = [event.attempt for event in probe["events"] if event.type == "attempt_started"]
        assert started == [1] * 39
    finally:
        await rt.close()


async def test_the_first_registration_of_an_id_in_a_turn_wins() -> None:
    """Two operations registering one id in one turn: the first owns it, the second raises."""
    rt, obj, clock = await start({})
    try:
        outcomes = await obj.register_many([["other", "x", None], ["work", "x", None]])
        assert outcomes == ["ok", DuplicateDurableCallError.__name__]
        await clock.run_until_idle()
        assert (await obj.stored("x"))[:2] == ["other", "completed"]
    finally:
        await rt.close()


async def test_claims_of_a_batch_are_on_disk_before_its_handlers_run(tmp_path: Path) -> None:
    """Every handler of a batch starts after its claim is committed to the file."""
    probe: dict[str, Any] = {}
    rt, obj, clock = await start(probe, tmp_path)
    try:
        await obj.register_many([["work", "first", None]])
        await clock.run_until_idle()
        [probe["file"]] = [str(path) for path in tmp_path.glob("B/*.sqlite3")]
        ids = [f"op-{number}" for number in range(25)]
        await obj.register_many([["work", id, None] for id in ids])
        await clock.run_until_idle()
        assert {id: probe["on_disk"][id] for id in ids} == {id: 1 for id in ids}
    finally:
        await rt.close()


async def test_a_stale_attempt_in_a_batch_cannot_store_its_result() -> None:
    """The set-based completion is fenced per row: the outcome of a replaced generation
    is dropped, and the newer generation runs on its own."""
    probe: dict[str, Any] = {}
    rt, obj, clock = await start(probe)
    try:
        await obj.register_many([["work", "stale-maker", None], ["work", "stale", None]])
        await clock.run_until_idle()
        assert (await obj.result("work", "stale-maker"))[0] == "completed"
        assert probe["ran"].count("stale") == 2
        assert (await obj.stored("stale"))[:3] == ["work", "completed", "newer"]
    finally:
        await rt.close()


async def test_an_unstorable_result_fails_only_its_own_row() -> None:
    """A result that is not JSON fails its record; the others of the batch complete."""
    rt, obj, clock = await start({})
    try:
        await obj.register_many([["work", "a", None], ["work", "unstorable", None]])
        await clock.run_until_idle()
        assert await obj.result("work", "a") == ["completed", "a", None]
        assert await obj.result("work", "unstorable") == [
            "failed",
            None,
            "DurableResultSerializationError",
        ]
    finally:
        await rt.close()


async def test_batches_keep_the_permit_limit_for_suspending_handlers() -> None:
    """Handlers that suspend run in their own tasks, never more at once than the permits."""
    probe: dict[str, Any] = {"permits": 3}
    rt, obj, clock = await start(probe)
    try:
        calls = [["slow", f"s{number}", None] for number in range(8)]
        calls += [["work", f"w{number}", None] for number in range(8)]
        assert await obj.register_many(calls) == ["ok"] * 16
        await clock.advance(10_000)
        assert probe["most"] == 3
        for operation, id, _ in calls:
            assert await obj.result(operation, id) == ["completed", id, None]
    finally:
        await rt.close()
