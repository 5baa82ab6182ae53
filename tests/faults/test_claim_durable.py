"""A claimed attempt is durable before its handler starts, also when commits run off the loop.

Here a handler reads its own row from a second connection; `tests/crash/test_alarm_kill.py`
kills the process inside a named-alarm handler instead.

The real-clock test takes no time of its own: it waits on results, never on the clock.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

from durability import Durability, DurabilityAlarms, DurabilityScheduler
from durability.runtime import DurableObject, Runtime


class ClaimWatcher(DurableObject):
    """An operation and a named alarm whose handlers read their own row's attempt from
    another connection."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.scheduler = DurabilityScheduler(context=ctx)
        self.durability = Durability(scheduler=self.scheduler, handlers={"look": self.look})
        self.alarms = DurabilityAlarms(scheduler=self.scheduler, handlers={"ring": self.ring})
        self.file: Path | None = None
        self.rung: asyncio.Queue[int] = asyncio.Queue()

    def look(self, call: Any) -> int:
        return self._committed_attempt("SELECT attempt FROM durability_calls WHERE id = ?", call.id)

    def ring(self, info: Any) -> None:
        self.rung.put_nowait(
            self._committed_attempt(
                "SELECT attempt FROM durability_alarms WHERE name = ?", info.name
            )
        )

    def _committed_attempt(self, query: str, key: str) -> int:
        # A second connection sees only committed rows: the claim's commit, if it ended.
        assert self.file is not None
        with sqlite3.connect(self.file) as other:
            row = other.execute(query, (key,)).fetchone()
        return int(row[0])

    async def ready(self) -> None:
        """Opens the object, so its file exists."""

    async def run(self, file: str, key: str) -> Any:
        self.file = Path(file)
        await self.durability.look(id=key, payload=None)
        return (await self.durability.look.job(key).wait()).result

    async def ring_now(self, file: str) -> int:
        """Schedule the named alarm for now; the attempt its handler saw committed."""
        self.file = Path(file)
        await self.alarms.ring(int(time.time() * 1000))
        return await self.rung.get()

    async def alarm(self, info: Any = None) -> None:
        await self.scheduler.alarm(info)


async def test_claim_is_committed_before_the_handler_starts(tmp_path: Path) -> None:
    """On the real clock (commits in worker threads) a handler sees its claim committed."""
    async with Runtime(path=tmp_path, bindings={"P": ClaimWatcher}) as rt:
        stub = rt.env.P.get_by_name("p")
        await stub.ready()
        (file,) = (tmp_path / "P").glob("*.sqlite3")
        for number in range(20):
            assert await stub.run(str(file), f"op-{number}") == 1


async def test_named_alarm_claim_is_committed_before_the_handler_starts(tmp_path: Path) -> None:
    """On the real clock a named-alarm handler sees its claim (attempt 1) committed."""
    async with Runtime(path=tmp_path, bindings={"P": ClaimWatcher}) as rt:
        stub = rt.env.P.get_by_name("p")
        await stub.ready()
        (file,) = (tmp_path / "P").glob("*.sqlite3")
        for _ in range(5):
            assert await stub.ring_now(str(file)) == 1
