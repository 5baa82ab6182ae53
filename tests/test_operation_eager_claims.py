"""A registration due now is claimed in its own transaction: one commit, same guarantees."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from _hosts import hosted
from _lab import note_attempt_on_disk
from durability import DuplicateDurableCallError, Durability, DurableCall
from durability.cloudflare import adapt
from durability.runtime import DurableObject, ObjectId, Runtime
from durability.testing import Faults, VirtualClock

pytestmark = pytest.mark.usefixtures("host")


class Eager(DurableObject):
    """Operations awaited one by one; handlers report what they see, some wait on a gate."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.probe: dict[str, Any] = env["PROBE"]
        self.gate = asyncio.Event()
        self.durability = Durability(
            context=ctx,
            handlers={"work": self._work, "other": self._work, "held": self._held},
            alarm_concurrency=self.probe.get("permits", 10),
            on_lifecycle_event=self._event,
        )

    def _event(self, event: Any) -> None:
        self.probe.setdefault("events", []).append((event.type, event.id))

    def _work(self, call: DurableCall) -> str:
        self.probe.setdefault("ran", []).append((call.id, call.attempt))
        note_attempt_on_disk(self.probe, call.id)
        return call.id

    async def _held(self, call: DurableCall) -> str:
        self.probe.setdefault("ran", []).append((call.id, call.attempt))
        await self.gate.wait()
        return call.id

    async def register(self, operation: str, id: str, delay_ms: int | None = None) -> str:
        try:
            await self.durability.operation(operation)(id=id, delay_ms=delay_ms)
        except DuplicateDurableCallError as error:
            return type(error).__name__
        return "ok"

    async def open_gate(self) -> None:
        self.gate.set()

    async def free_permits(self) -> int:
        return int(self.durability._engine.permits.free)

    async def row(self, id: str) -> list[Any]:
        found = (
            adapt(self.ctx)
            .storage.sql.exec("SELECT status, attempt FROM durability_calls WHERE id = ?", id)
            .one()
        )
        return [found["status"], found["attempt"]]

    async def alarm(self, info: Any = None) -> None:
        await self.durability.alarm(info)


class CountedCommits(Faults):
    """Counts the commits of the object's turns that wrote; injects nothing."""

    def __init__(self) -> None:
        self.count = 0

    def commit(self, object_id: ObjectId) -> None:
        self.count += 1


async def start(
    clock: VirtualClock, probe: dict[str, Any], path: Path | None = None, **options: Any
) -> tuple[Runtime, Any]:
    bindings = {"E": Eager, "PROBE": probe}
    rt = Runtime(path=path, bindings=bindings, clock=clock, **hosted(), **options)
    await rt.start()
    return rt, rt.env.E.get_by_name("eager")


async def test_a_caller_awaiting_each_registration_pays_two_commits_per_operation(
    clock: VirtualClock,
) -> None:
    """The record and its claim share one commit; the result and the alarm the other."""
    commits = CountedCommits()
    probe: dict[str, Any] = {}
    rt, obj = await start(clock, probe, faults=commits)
    try:
        await obj.register("work", "warm-up")
        await clock.run_until_idle()
        before = commits.count
        for number in range(5):
            assert await obj.register("work", f"op-{number}") == "ok"
            await clock.run_until_idle()
        assert commits.count - before == 2 * 5
        assert probe["ran"] == [("warm-up", 1)] + [(f"op-{number}", 1) for number in range(5)]
        assert await obj.row("op-4") == ["completed", 1]
    finally:
        await rt.close()


async def test_a_claim_sharing_the_registration_commit_is_on_disk_before_the_handler(
    clock: VirtualClock, tmp_path: Path
) -> None:
    """The handler starts only once the one commit holding record and claim is durable,
    and its events come in order: registered, then attempt_started."""
    probe: dict[str, Any] = {}
    rt, obj = await start(clock, probe, tmp_path)
    try:
        await obj.register("work", "first")
        await clock.run_until_idle()
        [probe["file"]] = [str(path) for path in tmp_path.glob("E/*.sqlite3")]
        probe["events"].clear()
        await obj.register("work", "second")
        await clock.run_until_idle()
        assert probe["on_disk"] == {"second": 1}
        assert probe["events"] == [
            ("registered", "second"),
            ("attempt_started", "second"),
            ("attempt_settled", "second"),
        ]
    finally:
        await rt.close()


async def test_registrations_do_not_go_ahead_of_records_waiting_for_a_permit(
    clock: VirtualClock,
) -> None:
    """With the one permit held, later registrations wait their turn in order."""
    probe: dict[str, Any] = {"permits": 1}
    rt, obj = await start(clock, probe)
    try:
        ids = [f"held-{number}" for number in range(4)]
        for id in ids:
            await obj.register("held", id)
            await clock.run_until_idle()
        assert probe["ran"] == [(ids[0], 1)]
        await obj.open_gate()
        await clock.run_until_idle()
        await obj.register("held", "last")
        await clock.run_until_idle()
        assert probe["ran"] == [(id, 1) for id in [*ids, "last"]]
        assert await obj.free_permits() == 1
    finally:
        await rt.close()


async def test_a_registration_that_writes_nothing_gives_its_permit_back(
    clock: VirtualClock,
) -> None:
    """Registering an id again (same operation: no-op; another: error) claims nothing,
    runs nothing, and leaves every permit free; a delayed record is not claimed early."""
    probe: dict[str, Any] = {"permits": 2}
    rt, obj = await start(clock, probe)
    try:
        assert await obj.register("work", "x") == "ok"
        await clock.run_until_idle()
        assert await obj.register("work", "x") == "ok"
        assert await obj.register("other", "x") == DuplicateDurableCallError.__name__
        assert await obj.register("work", "later", 1_000) == "ok"
        assert await obj.free_permits() == 2
        assert await obj.row("later") == ["pending", 0]
        await clock.run_until_idle()
        assert await obj.row("x") == ["completed", 1]
        assert probe["ran"] == [("x", 1)]
        await clock.advance(1_000)
        assert probe["ran"] == [("x", 1), ("later", 1)]
    finally:
        await rt.close()
