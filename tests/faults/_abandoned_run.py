"""Child process: start a runtime on PATH, write to object NAME, exit without closing.

Usage: _abandoned_run.py PATH NAME [ALARM_MS]. Exiting with `os._exit` skips every
cleanup, as a killed process would: the catalog never hears of a clean close.

Without ALARM_MS it writes a value, keeping time with a virtual clock set to now, so its
start reads the modified files before it returns (on the real clock that scan runs
after start, and might not end before the exit). With ALARM_MS it sets the object's
alarm for that time instead, on the real clock, with settled catalog entries held back,
so the process dies before the catalog hears of the alarm.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

from durability.runtime import DurableObject, Runtime, _catalog
from durability.testing import VirtualClock


class Notes(DurableObject):
    async def put(self, key: str, value: Any) -> None:
        await self.ctx.storage.put(key, value)

    async def arm(self, at_ms: int) -> None:
        await self.ctx.storage.set_alarm(at_ms)


async def main(path: str, name: str, alarm_ms: int | None) -> None:
    if alarm_ms is None:
        clock = VirtualClock(int(time.time() * 1000))
        runtime = Runtime(path=path, bindings={"NOTES": Notes}, clock=clock)
    else:
        runtime = Runtime(path=path, bindings={"NOTES": Notes})
    await runtime.start()
    stub = runtime.env.NOTES.get_by_name(name)
    if alarm_ms is None:
        await stub.put("k", 1)
    else:
        _catalog.SETTLE_DELAY_S = 3600.0
        await stub.arm(alarm_ms)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else None))
