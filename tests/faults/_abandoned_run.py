"""Child process: start a runtime on PATH, write to object NAME, exit without closing.

Usage: _abandoned_run.py PATH NAME. Exiting with `os._exit` skips every cleanup, as a
killed process would: the catalog never hears of a clean close. It keeps time with a
virtual clock set to now, so its start reads the modified files before it returns
(on the real clock that scan runs after start, and might not end before the exit).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

from durability.runtime import DurableObject, Runtime
from durability.testing import VirtualClock


class Notes(DurableObject):
    async def put(self, key: str, value: Any) -> None:
        await self.ctx.storage.put(key, value)


async def main(path: str, name: str) -> None:
    clock = VirtualClock(int(time.time() * 1000))
    runtime = Runtime(path=path, bindings={"NOTES": Notes}, clock=clock)
    await runtime.start()
    await runtime.env.NOTES.get_by_name(name).put("k", 1)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
