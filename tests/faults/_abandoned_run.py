"""Child process: start a runtime on PATH, write to object NAME, exit without closing.

Usage: _abandoned_run.py PATH NAME. Exiting with `os._exit` skips every cleanup, as a
killed process would: the catalog never hears of a clean close.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from durability.runtime import DurableObject, Runtime


class Notes(DurableObject):
    async def put(self, key: str, value: Any) -> None:
        await self.ctx.storage.put(key, value)


async def main(path: str, name: str) -> None:
    runtime = Runtime(path=path, bindings={"NOTES": Notes})
    await runtime.start()
    await runtime.env.NOTES.get_by_name(name).put("k", 1)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
