"""Run as a script: a runtime under a low open-file limit, hit by a burst of calls to
new objects, then steady traffic while an evicted object's alarm comes due.

Prints one JSON document: how the burst went, how many later calls failed, and when
(on the virtual clock) the evicted object's alarm ran, if it did.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
from pathlib import Path
from typing import Any

from durability.runtime import DurableObject, Runtime
from durability.testing import VirtualClock

SECOND = 1_000


class Cell(DurableObject):
    """Writes a row per call; `hold` keeps its call (and its file) busy until the gate opens."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS hits (at INTEGER)")

    async def hit(self) -> int:
        self.ctx.storage.sql.exec("INSERT INTO hits (at) VALUES (?)", self.env.CLOCK.now_ms())
        return len(self.ctx.storage.sql.exec("SELECT at FROM hits").to_list())

    async def hold(self) -> None:
        self.ctx.storage.sql.exec("INSERT INTO hits (at) VALUES (0)")
        await self.env.GATE.wait()

    async def arm(self, at_ms: int) -> None:
        await self.ctx.storage.set_alarm(at_ms)

    async def alarm(self) -> None:
        self.env.FIRED.append(self.env.CLOCK.now_ms())


async def main(path: Path, limit: int) -> dict[str, Any]:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    clock = VirtualClock()
    fired: list[int] = []
    env = {"CELLS": Cell, "GATE": asyncio.Event(), "FIRED": fired, "CLOCK": clock}
    async with Runtime(path=path, bindings=env, clock=clock) as rt:
        cells = rt.env.CELLS
        sleeper = cells.get_by_name("sleeper")
        due = clock.now_ms() + 30 * SECOND
        await sleeper.arm(due)
        await rt.evict(sleeper)
        burst = [
            asyncio.ensure_future(cells.get_by_name(f"burst-{n}").hold()) for n in range(limit)
        ]
        await clock.advance(0)
        env["GATE"].set()  # type: ignore[attr-defined]
        outcomes = await asyncio.gather(*burst, return_exceptions=True)
        failed = [repr(outcome) for outcome in outcomes if isinstance(outcome, BaseException)]
        later_failures: list[str] = []
        for tick in range(60):
            for name in (f"new-{tick}", f"burst-{tick}", "steady"):
                try:
                    await cells.get_by_name(name).hit()
                except Exception as error:
                    later_failures.append(f"{name}: {error!r}")
            await clock.advance(SECOND)
        return {
            "open_database_cap": rt.max_open_databases,
            "burst_failed": len(failed),
            "burst_error": failed[0] if failed else None,
            "later_failures": later_failures,
            "alarm_due": due,
            "alarm_ran": fired,
        }


if __name__ == "__main__":
    result = asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2])))
    print(json.dumps(result))
