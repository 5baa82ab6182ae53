"""Child process of the fanout attempt crash test: a consumer that kills its own process.

Usage: fanout_child.py PATH KIND START_MS. Opens a file-backed Runtime on PATH, on a
virtual clock at START_MS, with one fanout object of KIND (`dlq`: exhausted messages go
to a dead-letter table of the object; `drop`: no DLQ). The first run enqueues one
message. The consumer prints "deliver ATTEMPT" (flushed) and SIGKILLs the process inside
deliver(), every time. A run in which nothing kills the process waits until the delivery
left the queue (moving the clock on a second at a time, so the host alarm's backoff
after each kill costs no real time), prints "state JSON" (pending deliveries and dead
letters) and exits normally.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from durability import (
    DurabilityFanout,
    FanoutInput,
    FanoutMessage,
    FanoutTarget,
    RetryPolicy,
    StoredMessage,
)
from durability.runtime import AlarmInvocationInfo, DurableObject, Runtime
from durability.testing import VirtualClock

MAX_ATTEMPTS = 3
LEASE_MS = 300
WAIT_MS = 600_000
STEP_MS = 1_000


def _deliver(messages: Sequence[FanoutMessage[str]]) -> None:
    for message in messages:
        sys.stdout.write(f"deliver {message.attempt}\n")
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


class Poison(DurableObject):
    """A fanout to one consumer that never survives a delivery."""

    use_dlq = True

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS dead (id TEXT PRIMARY KEY, stored TEXT NOT NULL)"
        )
        self.fanout: DurabilityFanout[str] = DurabilityFanout(
            context=ctx,
            targets={"consumer": FanoutTarget(deliver=_deliver)},
            retries=RetryPolicy(max_attempts=MAX_ATTEMPTS, delay=lambda attempt: 0),
            attempt_timeout_ms=LEASE_MS,
            alarm_min_delay_ms=1_000,
            dlq=self._dead_letter if self.use_dlq else None,
        )

    async def _dead_letter(self, message: StoredMessage[Any]) -> None:
        self.ctx.storage.sql.exec(
            "INSERT INTO dead (id, stored) VALUES (?, ?)",
            message.id,
            json.dumps(message.to_json()),
        )

    async def enqueue(self) -> None:
        result = await self.fanout.enqueue(FanoutInput("poison", id="m-1"))
        assert result.success, result.error

    async def state(self) -> dict[str, Any]:
        sql = self.ctx.storage.sql
        return {
            "pending": (await self.fanout.load()).outbound.pending_deliveries,
            "dead": [json.loads(row[0]) for row in sql.exec("SELECT stored FROM dead").raw()],
        }

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.fanout.alarm(info)


class PoisonNoDlq(Poison):
    """The same without a DLQ: an exhausted message is dropped."""

    use_dlq = False


bindings: dict[str, dict[str, object]] = {
    "dlq": {"POISON": Poison},
    "drop": {"POISON": PoisonNoDlq},
}


async def main(path: str, kind: str, start_ms: int) -> None:
    first = not os.path.exists(path)
    clock = VirtualClock(start_ms)
    async with Runtime(path=path, bindings=bindings[kind], clock=clock) as runtime:
        stub = runtime.env.POISON.get_by_name("poison")
        if first:
            await stub.enqueue()
        deadline = clock.now_ms() + WAIT_MS
        while True:
            state = await stub.state()
            if state["pending"] == 0 or clock.now_ms() > deadline:
                break
            await clock.advance(STEP_MS)
    sys.stdout.write(f"state {json.dumps(state)}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
