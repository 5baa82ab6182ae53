"""A double of a Cloudflare Python Durable Object's `ctx`, as observed on workerd.

It stands between an object and the embedded runtime's ctx (so data lives in the
runtime's real SQLite database, and eviction, restarts and alarm delivery are the
runtime's) and shows only what Cloudflare shows, in one of two flavours:

- `BUILTIN`: the SDK built into workerd hands out raw JavaScript proxies: rows are not
  subscriptable, NULL and "no alarm" are `jsnull`, BLOBs are ArrayBuffers, a Python
  `bytes` binding is stored as the text "b'...'", a callback passed without
  `create_proxy` is destroyed before JavaScript calls it later.
- `WORKERS_SDK`: `workers-runtime-sdk` (what pywrangler vendors) wraps ctx and storage,
  converting arguments (bytes to BLOBs, dicts, `None`) and results (`None`, `JsDict`
  rows, `memoryview` BLOBs); the transaction handed to a callback is still raw.

Both: camelCase names only; `sql.exec` errors are `JsException`s with Cloudflare's
messages; a cursor's `rowsWritten` also counts the index entries a write made (it is
no row count); `True` is stored as the text 'true'; every number is bound as REAL (an
integral value reads back as an int), and an int from +/-(2**53 - 1) outwards cannot be
bound (Pyodide makes it a BigInt); an exception raised inside `transaction` or
`blockConcurrencyWhile` comes back as `JsException: PythonError`; `waitUntil` refuses a
bare coroutine and complains about a Python task; the alarm info has only
`retryCount`/`isRetry`.

Not copied: Cloudflare ends every task of an instance it resets, and the runtime
cancels the work it tracks when `rt.evict` drops an instance; but a Python task handed
to `waitUntil` as a promise is not the runtime's to cancel, so in the double it runs on
after eviction, against storage the runtime has fenced (its writes fail).
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from _cf_builtin_sdk import RawAlarmInfo, RawContext
from _cf_ffi import modules
from _cf_workers_sdk import WorkersContext
from durability.runtime import ObjectContext

__all__ = [
    "BUILTIN",
    "WORKERS_SDK",
    "CloudflarePlatform",
    "RawAlarmInfo",
    "RawContext",
    "WorkersContext",
    "install",
]

BUILTIN = "builtin-sdk"
WORKERS_SDK = "workers-sdk"


def cloudflare_ctx(ctx: Any, flavour: str) -> Any:
    """The Cloudflare `ctx` an object would get, in `flavour`, over the runtime's `ctx`."""
    raw = RawContext(ctx)
    return raw if flavour == BUILTIN else WorkersContext(raw)


class CloudflarePlatform:
    """A runtime `Platform` that hosts objects as Cloudflare would: each `ctx` is the
    double in `flavour` over the runtime's, and `alarm()` gets Cloudflare's info. Every
    double made is added to `made` (to check their `complaints` afterwards)."""

    def __init__(self, flavour: str) -> None:
        self.flavour = flavour
        self.made: list[RawContext] = []

    def context(self, ctx: ObjectContext) -> Any:
        double = cloudflare_ctx(ctx, self.flavour)
        self.made.append(double if isinstance(double, RawContext) else double._ctx)
        return double

    def alarm_info(self, retry_count: int, is_retry: bool) -> RawAlarmInfo:
        return RawAlarmInfo(retry_count, is_retry)


def install(monkeypatch: pytest.MonkeyPatch, flavour: str) -> CloudflarePlatform:
    """Make `js` and `pyodide` importable as on Cloudflare, and return the platform that
    hosts objects there in `flavour` (a runtime built with `platform=` it)."""
    for name, module in modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    return CloudflarePlatform(flavour)
