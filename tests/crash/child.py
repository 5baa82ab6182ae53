"""Child process of the SIGKILL crash test: writes through stubs until it is killed.

Usage: child.py PATH SEED [MAX_OPEN]. Opens a file-backed Runtime on PATH, prints
"ready", then runs many concurrent writers against a few objects (with MAX_OPEN: at
most that many object files open, and two writers, so idle objects' files are closed
and reopened all the time). Each writer prints the id of a
write only after the stub call returned (the runtime's acknowledgement), flushed, so
the parent knows exactly which writes were acknowledged when the kill came.
"""

from __future__ import annotations

import asyncio
import random
import sys
from typing import Any

from durability.runtime import DurableObject, Runtime

OBJECTS = 4
WRITERS = 48


class Ledger(DurableObject):
    """Records ids in SQL and in KV; `ids` lists everything stored."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS written (id TEXT PRIMARY KEY)")

    async def write_sql(self, write_id: str) -> None:
        self.ctx.storage.sql.exec("INSERT INTO written (id) VALUES (?)", write_id)

    async def write_kv(self, write_id: str) -> None:
        await self.ctx.storage.put(write_id, True)

    async def write_transaction(self, write_id: str) -> None:
        def insert() -> None:
            self.ctx.storage.sql.exec("INSERT INTO written (id) VALUES (?)", write_id)

        self.ctx.storage.transaction_sync(insert)

    async def ids(self) -> list[str]:
        rows = self.ctx.storage.sql.exec("SELECT id FROM written").to_list()
        stored = await self.ctx.storage.list()
        return [row["id"] for row in rows] + list(stored)


bindings = {"LEDGERS": Ledger}


async def main(path: str, seed: int, max_open: int | None) -> None:
    rng = random.Random(seed)
    writers = WRITERS if max_open is None else 2
    async with Runtime(path=path, bindings=bindings, max_open_databases=max_open) as runtime:
        namespace = runtime.env.LEDGERS
        stubs = [namespace.get_by_name(f"ledger-{n}") for n in range(OBJECTS)]
        out = sys.stdout
        out.write("ready\n")
        out.flush()

        async def writer(number: int) -> None:
            for sequence in range(1_000_000):
                target = rng.randrange(OBJECTS)
                method = rng.choice(("write_sql", "write_kv", "write_transaction"))
                write_id = f"{seed}-{number}-{sequence}"
                await getattr(stubs[target], method)(write_id)
                out.write(f"{target} {write_id}\n")
                out.flush()

        await asyncio.gather(*(writer(n) for n in range(writers)))


if __name__ == "__main__":
    max_open = int(sys.argv[3]) if len(sys.argv) > 3 else None
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), max_open))
