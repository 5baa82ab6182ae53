"""The retained log: `DurabilityLog` and its record, lease and retention types.

`log` is the capability, `store` its SQL, `reader` hot and cold reads, `leases` the
leased consumption, `retention` what `trim()` removes, `types` the public value types.
"""

from __future__ import annotations

from .log import DurabilityLog
from .types import (
    MAX_LOG_BYTES,
    LeaseRow,
    LogAppendInput,
    LogBounds,
    LogColdStorage,
    LogLease,
    LogLeaseOptions,
    LogPage,
    LogRecord,
    LogRetention,
    LogSegment,
)

__all__ = [
    "MAX_LOG_BYTES",
    "DurabilityLog",
    "LeaseRow",
    "LogAppendInput",
    "LogBounds",
    "LogColdStorage",
    "LogLease",
    "LogLeaseOptions",
    "LogPage",
    "LogRecord",
    "LogRetention",
    "LogSegment",
]
