"""Child process of the one-caller crash test: registers operations one after another.

Usage: one_caller_child.py PATH RUN. Opens a file-backed Runtime on PATH (real clock),
prints "ready", then registers durable operations `op-<RUN>-<n>` in series on one
object, printing each id (flushed) once its registration call returned. Each handler
inserts its id into the object's `effects` table; one in `SLOW_EVERY` first sleeps
`SLOW_S`, so a kill often lands while a handler runs. The object's fallback alarm is 1 s
away, so after a kill a new runtime wakes the object for the claimed calls on its own.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from durability import Durability, DurableCall
from durability.runtime import AlarmInvocationInfo, DurableObject, Runtime

FALLBACK_MS = 1_000
SLOW_EVERY = 7
SLOW_S = 0.01


class Series(DurableObject):
    """Registers operations; each one's handler records its effect."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS effects (id TEXT PRIMARY KEY)")
        self.durability = Durability(
            context=ctx, handlers={"step": self._step}, alarm_min_delay_ms=FALLBACK_MS
        )

    async def _step(self, call: DurableCall[Any]) -> None:
        if sum(map(ord, call.id)) % SLOW_EVERY == 0:
            await asyncio.sleep(SLOW_S)
        self.ctx.storage.sql.exec("INSERT OR IGNORE INTO effects (id) VALUES (?)", call.id)

    async def register(self, id: str) -> None:
        await self.durability.step(id=id)

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.durability.alarm(info)


async def main(path: str, run: str) -> None:
    async with Runtime(path=path, bindings={"SERIES": Series}) as runtime:
        stub: Any = runtime.env.SERIES.get_by_name("series")
        await stub.register(f"op-{run}-start")
        print("ready", flush=True)
        number = 0
        while True:
            call_id = f"op-{run}-{number}"
            await stub.register(call_id)
            print(call_id, flush=True)
            number += 1


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
