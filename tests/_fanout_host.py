"""A fanout test object driven by a `FanoutProbe`: consumer behaviours in, observations out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from _lab import Lab, open_lab
from _probe import Probe
from durability import (
    DurabilityFanout,
    FanoutInput,
    FanoutMessage,
    FanoutTarget,
    StoredMessage,
)
from durability.runtime import AlarmInvocationInfo, DurableObject

Behaviour = Callable[[Sequence[FanoutMessage[Any]]], Awaitable[None]]


async def ack_all(messages: Sequence[FanoutMessage[Any]]) -> None:
    """The default consumer: ack every message explicitly."""
    for message in messages:
        await message.ack()


async def settle_nothing(messages: Sequence[FanoutMessage[Any]]) -> None:
    """A consumer that returns without settling anything."""


class FanoutProbe(Probe):
    """The probe of a fanout: its targets and options for the next instance (behaviours by
    target name), and what the targets saw."""

    def __init__(
        self,
        consumers: dict[str, dict[str, Any]] | None = None,
        storage: dict[str, dict[str, Any]] | None = None,
        options: dict[str, Any] | None = None,
        use_dlq: bool = False,
    ) -> None:
        super().__init__(**(options or {}))
        self.consumers = {"email": {}, "audit": {}} if consumers is None else consumers
        self.storage: dict[str, dict[str, Any]] = {} if storage is None else storage
        self.use_dlq = use_dlq
        self.batches: list[tuple[str, list[tuple[str, int, Any]]]] = []
        self.received: list[FanoutMessage[Any]] = []
        self.written: dict[str, list[StoredMessage[Any]]] = {}
        self.dead: list[StoredMessage[Any]] = []
        self.dlq_failures = 0
        self.dlq_hang = False
        self.write_failures = 0

    def targets(self) -> dict[str, FanoutTarget[Any]]:
        built: dict[str, FanoutTarget[Any]] = {}
        for name, options in self.consumers.items():
            built[name] = FanoutTarget(deliver=self._consumer(name), **options)
        for name, options in self.storage.items():
            built[name] = FanoutTarget(storage=self._writer(name), **options)
        return built

    def _consumer(self, name: str) -> Callable[[Sequence[FanoutMessage[Any]]], Awaitable[None]]:
        async def deliver(messages: Sequence[FanoutMessage[Any]]) -> None:
            self.batches.append((name, [(m.id, m.attempt, m.body) for m in messages]))
            self.received.extend(messages)
            await self.behaviour.get(name, ack_all)(messages)

        return deliver

    def _writer(self, name: str) -> Callable[[StoredMessage[Any]], Awaitable[None]]:
        async def write(message: StoredMessage[Any]) -> None:
            if self.write_failures:
                self.write_failures -= 1
                raise OSError("disk full")
            self.written.setdefault(name, []).append(message)

        return write

    async def dlq(self, message: StoredMessage[Any]) -> None:
        if self.dlq_hang:
            await asyncio.Event().wait()
        if self.dlq_failures:
            self.dlq_failures -= 1
            raise OSError("dlq unavailable")
        self.dead.append(message)

    def delivered(self, target: str) -> list[tuple[str, int]]:
        """(message id, attempt) of every message handed to `target`, in order."""
        return [
            (id, attempt)
            for name, batch in self.batches
            if name == target
            for id, attempt, _ in batch
        ]

    def of_type(self, kind: str) -> list[Any]:
        return [event for event in self.events if event.type == kind]


class Hub(DurableObject):
    """An object with one fanout on a private scheduler, configured by the probe."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        probe: FanoutProbe = env["PROBE"]
        self.fanout: DurabilityFanout[Any] = DurabilityFanout(
            context=ctx,
            targets=probe.targets(),
            dlq=probe.dlq if probe.use_dlq else None,
            on_lifecycle_event=probe.events.append,
            **probe.options,
        )

    async def enqueue(
        self, messages: list[dict[str, Any]], targets: list[str] | None = None
    ) -> dict[str, Any]:
        inputs = [
            FanoutInput(body=m.get("body"), id=m.get("id"), deduplication_key=m.get("key"))
            for m in messages
        ]
        result = await self.fanout.enqueue(inputs, targets)
        error = None if result.error is None else [result.error.name, result.error.message]
        return {
            "success": result.success,
            "value": result.value,
            "error": error,
            "pending": result.load.outbound.pending_deliveries,
            "inbound": result.load.inbound.completed,
        }

    async def enqueue_unserializable(self) -> str | None:
        """Enqueue a set body; the error name of the (expected) rejection."""
        result = await self.fanout.enqueue(FanoutInput(body={1, 2}))
        return None if result.error is None else result.error.name

    async def rows(self) -> list[dict[str, Any]]:
        return self.ctx.storage.sql.exec(
            "SELECT id, target_id, phase, attempt, next_attempt_at, last_error_name, last_error, "
            "dead_letter_reason FROM durability_fanout_deliveries ORDER BY seq, target_id"
        ).to_list()

    async def manifests(self) -> list[dict[str, Any]]:
        return self.ctx.storage.sql.exec(
            "SELECT key, id, remaining, seq FROM durability_fanout_messages ORDER BY seq"
        ).to_list()

    async def pending(self) -> int:
        return (await self.fanout.load()).outbound.pending_deliveries

    async def alarm_at(self) -> int | None:
        return await self.ctx.storage.get_alarm()

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.fanout.alarm(info)


@asynccontextmanager
async def hub(probe: FanoutProbe, **options: Any) -> AsyncIterator[Lab[FanoutProbe]]:
    """Object "a" of `Hub` at START_MS (options go to the fanout)."""
    probe.options.update(options)
    async with open_lab("HUB", Hub, probe) as lab:
        yield lab


def bodies(*values: Any) -> list[dict[str, Any]]:
    """Messages with ids m1, m2, ... and the given bodies."""
    return [{"id": f"m{number}", "body": value} for number, value in enumerate(values, 1)]
