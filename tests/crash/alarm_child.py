"""Child process of the named-alarm attempt crash test: a handler that kills its process.

Usage: alarm_child.py PATH START_MS. Opens a file-backed Runtime on PATH, on a virtual
clock at START_MS, with one object holding a named alarm `poison`. The first run
schedules it for now. Its handler prints "ring ATTEMPT" (flushed) and SIGKILLs the
process, every time. A run in which nothing kills the process waits until the occurrence
stopped being retried (moving the clock on a second at a time, so the host alarm's
backoff after each kill costs no real time), prints "state JSON" (its stored attempt,
status and last error name) and exits normally.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from typing import Any

from durability import DurabilityAlarms, DurableAlarmInfo, RetryPolicy, now_ms
from durability.runtime import AlarmInvocationInfo, DurableObject, Runtime
from durability.testing import VirtualClock

MAX_ATTEMPTS = 3
LEASE_MS = 300
WAIT_MS = 600_000
STEP_MS = 1_000


def _ring(info: DurableAlarmInfo) -> None:
    sys.stdout.write(f"ring {info.attempt}\n")
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


class Poison(DurableObject):
    """A named alarm whose handler never survives its attempt."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.alarms = DurabilityAlarms(
            context=ctx,
            handlers={"poison": _ring},
            retries=RetryPolicy(max_attempts=MAX_ATTEMPTS, delay=lambda attempt: 0),
            attempt_timeout_ms=LEASE_MS,
            alarm_min_delay_ms=1_000,
        )

    async def schedule(self) -> None:
        await self.alarms.poison(now_ms())

    async def state(self) -> dict[str, Any] | None:
        stored = await self.alarms.poison.get()
        if stored is None:
            return None
        error = stored.last_error
        return {
            "attempt": stored.attempt,
            "status": stored.status,
            "error": None if error is None else error.name,
        }

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.alarms.alarm(info)


async def main(path: str, start_ms: int) -> None:
    first = not os.path.exists(path)
    clock = VirtualClock(start_ms)
    async with Runtime(path=path, bindings={"POISON": Poison}, clock=clock) as runtime:
        stub = runtime.env.POISON.get_by_name("poison")
        if first:
            await stub.schedule()
        deadline = clock.now_ms() + WAIT_MS
        while True:
            state = await stub.state()
            if state is None or state["status"] == "failed" or clock.now_ms() > deadline:
                break
            await clock.advance(STEP_MS)
    sys.stdout.write(f"state {json.dumps(state)}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
