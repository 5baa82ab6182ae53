"""A pass whose batch meets a row already running here gives back every permit it took."""

from __future__ import annotations

from typing import Any

from conftest import MakeRuntime
from durability import Durability, DurableCall, now_ms
from durability._engine.tables import due_rows
from durability.runtime import DurableObject
from durability.testing import VirtualClock

PERMITS = 4


class Skips(DurableObject):
    """Operations that note their runs, and a pass over them run by hand (the object's
    alarm runs none: the test alone starts them)."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.ran: list[str] = env["RAN"]
        self.durability = Durability(
            context=ctx, handlers={"work": self._work}, alarm_concurrency=PERMITS
        )

    def _work(self, call: DurableCall) -> None:
        self.ran.append(call.id)

    async def register(self, id: str) -> None:
        await self.durability.work(id=id, delay_ms=60_000)

    async def pass_skipping(self, skipped: str) -> int:
        """Run the due records as an alarm pass does, `skipped` having started running
        here since the pass read it (its attempt is `None`); the free permits after."""
        helper = self.durability
        engine = helper._engine
        table = helper._table
        rows = due_rows(engine.sql, table, helper._due_columns, now_ms(), 10)

        def attempt_of(row: tuple[Any, ...]) -> Any:
            return None if row[0] == skipped else helper._due_attempt(row, None)

        failures = await engine.runner.run(rows, attempt_of, table=table.name)
        assert failures == []
        return int(engine.permits.free)

    async def status(self, id: str) -> str:
        return (await self.durability.work.get_result(id)).status

    async def alarm(self, info: Any = None) -> None:
        return None


async def test_a_batch_with_a_row_running_already_runs_the_others_and_frees_its_permits(
    make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """The last batch of a pass takes a permit per row left; a row found running here by
    then is skipped, the others run, and no permit or key stays taken."""
    ran: list[str] = []
    async with make_runtime(bindings={"S": Skips, "RAN": ran}) as rt:
        obj = rt.env.S.get_by_name("skips")
        for id in ("a", "b", "c"):
            await obj.register(id)
        await clock.advance(60_000)
        assert await obj.pass_skipping("a") == PERMITS
        assert sorted(ran) == ["b", "c"]
        assert [await obj.status(id) for id in ("b", "c")] == ["completed", "completed"]
