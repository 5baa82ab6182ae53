"""A durable object hosting a `DurabilityLog`, shared by the log tests.

The log is built in `__init__` from the `LOG_CONFIG` binding (a plain object passed
through `env`), so every instance, after eviction or a restart, is configured alike.
Methods take and return JSON values, as stub calls require.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from _hosts import hosted
from durability import (
    DurabilityLog,
    LogAppendInput,
    LogColdStorage,
    LogLease,
    LogLeaseOptions,
    LogRetention,
)
from durability.cloudflare import adapt
from durability.runtime import DurableObject, ObjectStub, Runtime
from durability.testing import VirtualClock


@dataclass
class LogConfig:
    """How `LogHost` builds its log; `poisoned` collects the leases `on_poison` saw."""

    max_batch_size: int = 100
    retention: LogRetention | None = None
    cold: LogColdStorage | None = None
    leases: LogLeaseOptions | None = None
    poisoned: list[LogLease[Any]] = field(default_factory=list)


def _json(value: Any) -> Any:
    if value is None:
        return None
    return dataclasses.asdict(value)


class LogHost(DurableObject):
    """One partition: a log and thin JSON wrappers around its methods."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        config: LogConfig = env["LOG_CONFIG"]
        self.log: DurabilityLog[Any] = DurabilityLog(
            context=ctx,
            max_batch_size=config.max_batch_size,
            retention=config.retention,
            cold=config.cold,
            leases=config.leases,
        )

    async def append(self, items: list[Any]) -> Any:
        """Append `[body, key]` pairs (key may be None) as one batch."""
        batch = [LogAppendInput(body, key) for body, key in items]
        return _json(await self.log.append(batch))

    async def append_one(self, body: Any, key: str | None = None) -> Any:
        """Append one record given as a single input, not a list."""
        return _json(await self.log.append(LogAppendInput(body, key)))

    async def read(self, from_offset: int, limit: int | None = None) -> Any:
        return _json(await self.log.read(from_offset, limit))

    async def bounds(self) -> Any:
        return _json(await self.log.bounds())

    async def cursor(self, consumer: str) -> int | None:
        return await self.log.cursor(consumer)

    async def commit(self, consumer: str, offset: int) -> None:
        await self.log.commit(consumer, offset)

    async def cursors(self) -> dict[str, int]:
        return await self.log.cursors()

    async def trim(self) -> int:
        return await self.log.trim()

    async def forget_cold_before(self, offset: int) -> int:
        return await self.log.forget_cold_before(offset)

    async def load(self) -> Any:
        return _json(await self.log.load())

    async def lease(self, consumer: str, limit: int | None = None) -> Any:
        return _json(await self.log.lease(consumer, limit))

    async def ack(self, consumer: str, batch_id: str) -> None:
        await self.log.ack(consumer, batch_id)

    async def nack(self, consumer: str, batch_id: str) -> None:
        await self.log.nack(consumer, batch_id)

    async def leases(self, consumer: str) -> list[Any]:
        return [_json(row) for row in await self.log.leases(consumer)]

    async def tables(self) -> list[str]:
        """The log's tables present in this object's database."""
        rows = adapt(self.ctx).storage.sql.exec(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'durability_log%' "
            "ORDER BY name"
        )
        return [row["name"] for row in rows]


def runtime(config: LogConfig, clock: VirtualClock, path: Any = None) -> Runtime:
    """A runtime hosting `LogHost` objects configured by `config`, on the test's host."""
    bindings = {"LOGS": LogHost, "LOG_CONFIG": config}
    return Runtime(path=path, bindings=bindings, clock=clock, **hosted())


def partition(rt: Runtime, name: str = "p") -> ObjectStub:
    """The stub of one `LogHost` object."""
    return rt.namespace("LOGS").get_by_name(name)


def items(*bodies: Any) -> list[list[Any]]:
    """`[body, None]` pairs: records without deduplication keys."""
    return [[body, None] for body in bodies]
