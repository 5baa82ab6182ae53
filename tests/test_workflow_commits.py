"""What a workflow run commits: the create claims its first run, a step's result shares
the next step's commit, the completion shares the last step's; and what that asks of
the step API (a step runs in the task that awaits it)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from durability import Durable, workflow
from durability.runtime import DurableObject, Runtime, _database
from durability.testing import VirtualClock


class Chains(Durable, DurableObject):
    """`chain`: `steps` plain steps one after another, each noting the task it ran in."""

    @workflow
    async def chain(self, event: Any, step: Any) -> int:
        seen: list[Any] = self.env["SEEN"]

        def numbered(number: int) -> Any:
            @step.do(f"step {number}")
            def one() -> int:
                seen.append((number, asyncio.current_task()))
                return number

            return one

        seen.append(("code", asyncio.current_task()))
        if event.payload.get("forget"):
            forgotten = numbered(99)()  # called, never awaited: it does not run
            forgotten.close()
        total = 0
        for number in range(event.payload["steps"]):
            total += await numbered(number)()
        return total

    async def start(self, id: str, steps: int, forget: bool = False) -> None:
        await self.chain.create(id=id, params={"steps": steps, "forget": forget})

    async def start_paused(self, id: str) -> None:
        instance = await self.chain.create(id=id, params={"steps": 2})
        await instance.pause()

    async def status(self, id: str) -> dict[str, Any]:
        return dict(await (await self.chain.get(id)).status())

    async def journal(self, id: str) -> list[list[Any]]:
        return [
            list(row)
            for row in self.ctx.storage.sql.exec(
                "SELECT name, status, attempt FROM durability_workflow_steps "
                "WHERE instance_key = ? ORDER BY seq",
                f"chain:{id}",
            ).raw()
        ]


def count_writing_commits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the commits that wrote (ran more than reads), of every object database from
    now on."""
    counted = [0]
    ended = _database.Database.transaction_ended

    def counting(
        database: _database.Database, transaction: asyncio.Future[None], wrote: bool = True
    ) -> None:
        counted[0] += wrote and database.dirty
        ended(database, transaction, wrote)

    monkeypatch.setattr(_database.Database, "transaction_ended", counting)
    return counted


@pytest.mark.parametrize("steps", [1, 3, 10])
async def test_a_workflow_of_n_steps_commits_n_plus_two_times(
    steps: int, clock: VirtualClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Create -> complete takes n + 2 commits: the instance with its claimed run, each
    step's start with the result before it, the last result with the completion."""
    seen: list[Any] = []
    async with Runtime(path=tmp_path, bindings={"C": Chains, "SEEN": seen}, clock=clock) as rt:
        stub = rt.env.C.get_by_name("chains")
        await stub.start("warm-up", 1)
        await clock.run_until_idle()
        commits = count_writing_commits(monkeypatch)
        await stub.start("timed", steps)
        await clock.run_until_idle()
        assert await stub.status("timed") == {
            "status": "complete",
            "error": None,
            "output": sum(range(steps)),
        }
        assert commits[0] == steps + 2
        assert await stub.journal("timed") == [
            [f"step {number}", "complete", 1] for number in range(steps)
        ]


async def test_a_step_runs_when_awaited_in_the_awaiting_task(clock: VirtualClock) -> None:
    """A step runs in the task that awaits it, as on Cloudflare: one called and never
    awaited does not run."""
    seen: list[Any] = []
    async with Runtime(bindings={"C": Chains, "SEEN": seen}, clock=clock) as rt:
        stub = rt.env.C.get_by_name("chains")
        await stub.start("forgetful", 2, True)
        await clock.run_until_idle()
        assert (await stub.status("forgetful"))["status"] == "complete"
        labels = [label for label, _ in seen]
        assert labels == ["code", 0, 1]
        assert len({task for _, task in seen}) == 1
        assert await stub.journal("forgetful") == [
            ["step 0", "complete", 1],
            ["step 1", "complete", 1],
        ]


async def test_a_pause_asked_as_the_create_claims_the_run_is_taken(
    clock: VirtualClock,
) -> None:
    """An instance paused in the call that created it (its run claimed by the create,
    not started yet) pauses before its first step."""
    seen: list[Any] = []
    async with Runtime(bindings={"C": Chains, "SEEN": seen}, clock=clock) as rt:
        stub = rt.env.C.get_by_name("chains")
        await stub.start_paused("held")
        await clock.run_until_idle()
        assert (await stub.status("held"))["status"] == "paused"
        assert await stub.journal("held") == []
        assert [label for label, _ in seen] == ["code"]
