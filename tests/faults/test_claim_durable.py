"""A claimed attempt is durable before its handler starts, also when commits run off the loop.

The real-clock test takes no time of its own: it waits on results, never on the clock.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from durability import Durability, DurabilityScheduler
from durability.runtime import DurableObject, Runtime


class Probe(DurableObject):
    """An operation whose handler reads its own row's attempt from another connection."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.scheduler = DurabilityScheduler(context=ctx)
        self.durability = Durability(scheduler=self.scheduler, handlers={"look": self.look})
        self.file: Path | None = None

    def look(self, call: Any) -> int:
        # A second connection sees only committed rows: the claim's commit, if it ended.
        assert self.file is not None
        with sqlite3.connect(self.file) as other:
            row = other.execute(
                "SELECT attempt FROM durability_calls WHERE id = ?", (call.id,)
            ).fetchone()
        return int(row[0])

    async def ready(self) -> None:
        """Opens the object, so its file exists."""

    async def run(self, file: str, key: str) -> Any:
        self.file = Path(file)
        await self.durability.look(id=key, payload=None)
        return (await self.durability.look.job(key).wait()).result

    async def alarm(self, info: Any = None) -> None:
        await self.scheduler.alarm(info)


async def test_claim_is_committed_before_the_handler_starts(tmp_path: Path) -> None:
    """On the real clock (commits in worker threads) a handler sees its claim committed."""
    async with Runtime(path=tmp_path, bindings={"P": Probe}) as rt:
        stub = rt.env.P.get_by_name("p")
        await stub.ready()
        (file,) = (tmp_path / "P").glob("*.sqlite3")
        for number in range(20):
            assert await stub.run(str(file), f"op-{number}") == 1
