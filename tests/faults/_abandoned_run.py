"""Child process: start a runtime on PATH, write to object NAME, exit without closing.

Usage: _abandoned_run.py PATH NAME [ALARM_MS]. Exiting with `os._exit` skips every
cleanup, as a killed process would: the catalog never hears of a clean close. With
ALARM_MS the object's alarm is set for that time instead, and settled catalog entries
are held back, so the process dies before the catalog hears of the alarm.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from durability.runtime import DurableObject, Runtime, _catalog


class Notes(DurableObject):
    async def put(self, key: str, value: Any) -> None:
        await self.ctx.storage.put(key, value)

    async def arm(self, at_ms: int) -> None:
        await self.ctx.storage.set_alarm(at_ms)


async def main(path: str, name: str, alarm_ms: int | None) -> None:
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
