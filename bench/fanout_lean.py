"""The least work of bench/fanout.py's workload through the embedded runtime
(`LeanFanout`): the raw floor's commits, but each enqueue a call into the object.

What the raw floor (fanout_raw.bench_floor) does with plain sqlite3, this object does
through the runtime's stubs and `ctx.storage.sql`: a call per enqueue that returns once
its message is durable, the enqueues of a turn registered in that turn's commit
(multi-row statements of at most 100 bindings, as on Cloudflare), and, per target and
batch of 100, the claims' commit before the batch would be handed over and the
removals' commit after. Left out: everything else the library does (ids and bodies
checked, JSON encoded and decoded, messages built for a handler, handlers called,
retries, leases, dead letters, generations checked against the object's, lifecycle
events, the alarm). A library that does its work through this runtime costs at least
this much per message.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fanout_raw import BATCH, DUE, TARGETS, claim_set, register_set, remove_set

from durability import now_ms
from durability._engine.migrations import migrate
from durability._fanout.schema import FANOUT_MIGRATIONS
from durability.runtime import DurableObject, Runtime


class LeanFanout(DurableObject):
    """The fanout's commits for two targets through this runtime, and nothing else."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        migrate(ctx.storage, "fanout", FANOUT_MIGRATIONS)
        self.keys: list[str] = []
        self.registered: asyncio.Future[None] | None = None
        self.delivering = False
        self.settled = 0
        self.target = 0
        self.done = asyncio.Event()

    def _execute(self, statement: str, bindings: Sequence[Any]) -> object:
        return self.ctx.storage.sql.exec(statement, *bindings)

    async def enqueue(self, ids: list[str]) -> None:
        """Enqueue messages with these ids; returns once they are durable."""
        registered = self.registered
        if registered is None:
            registered = self.registered = asyncio.get_running_loop().create_future()
            self.ctx.wait_until(self._register())
        self.keys.extend(ids)
        await registered

    async def expect(self, count: int) -> None:
        """Arm the completion counter for `count` messages per target."""
        self.settled = 0
        self.target = count * len(TARGETS)
        self.done.clear()

    async def wait_delivered(self) -> int:
        """Wait until both targets settled everything; return the rows still stored."""
        await self.done.wait()
        rows = self.ctx.storage.sql.exec(
            "SELECT (SELECT COUNT(*) FROM durability_fanout_deliveries) + "
            "(SELECT COUNT(*) FROM durability_fanout_messages) AS n"
        )
        return int(rows.one()["n"])

    async def _register(self) -> None:
        """One turn's enqueues in its commit; once durable, their callers are answered
        and the targets' delivery runs (unless it runs already)."""
        keys, self.keys = self.keys, []
        registered, self.registered = self.registered, None
        assert registered is not None
        end = self.ctx.storage.sql.exec(
            "UPDATE durability_fanout_seq SET next_seq = next_seq + ? WHERE id = 1 "
            "RETURNING next_seq",
            len(keys),
        ).one()["next_seq"]
        register_set(self._execute, keys, int(end) - len(keys), now_ms())
        try:
            await self.ctx.storage.sync()
        except Exception as error:
            registered.set_exception(error)
            raise
        registered.set_result(None)
        if not self.delivering:
            self.delivering = True
            self.ctx.wait_until(self._deliver())

    async def _deliver(self) -> None:
        """Take each target's due rows a batch at a time until none is left: claims
        committed, then (the batch handed over and acknowledged) removals committed."""
        storage = self.ctx.storage
        try:
            found = True
            while found:
                found = False
                for target in TARGETS:
                    now = now_ms()
                    rows = storage.sql.exec(DUE, target, now, BATCH).raw()
                    batch = [(row[0], row[1]) for row in rows]
                    if not batch:
                        continue
                    found = True
                    ids = [row[0] for row in batch]
                    claim_set(self._execute, ids, now)
                    await storage.sync()
                    remove_set(self._execute, ids, [row[1] for row in batch])
                    await storage.sync()
                    self.settled += len(batch)
            if self.settled >= self.target:
                self.done.set()
        finally:
            self.delivering = False


async def drive(bench: Any, messages: int, callers: int, per_call: int) -> tuple[float, float]:
    """Enqueue `messages` through the stub `bench` (a fanout benchmark object: `expect`,
    `enqueue`, `wait_delivered`) from `callers` concurrent callers, `per_call` messages
    per enqueue; seconds from the first enqueue until both targets settled them all, and
    the process CPU seconds spent meanwhile."""
    await bench.expect(messages)
    calls = iter(range(0, messages, per_call))

    async def caller() -> None:
        for first in calls:
            last = min(first + per_call, messages)
            await bench.enqueue([f"m-{number}" for number in range(first, last)])

    started = time.perf_counter()
    cpu_started = time.process_time()
    await asyncio.gather(*(caller() for _ in range(callers)))
    left = await bench.wait_delivered()
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    assert left == 0, left
    return elapsed, cpu


async def bench_lean(
    directory: Path | None, messages: int, callers: int, per_call: int = 1
) -> tuple[float, float]:
    """`drive` through `LeanFanout` (`directory=None`: on the in-memory runtime)."""
    async with Runtime(path=directory, bindings={"LEAN": LeanFanout}) as rt:
        return await drive(rt.env.LEAN.get_by_name("lean"), messages, callers, per_call)
