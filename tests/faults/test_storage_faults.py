"""The storage-fault harness: commits, alarm writes, catalog writes and cold writes fail
on chosen calls while work is submitted and runs; once the faults stop, every
acknowledged item completes with no further call from outside."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import MakeRuntime
from durability import (
    Durability,
    DurabilityAlarms,
    DurabilityLog,
    DurabilityScheduler,
    DurableAlarmInfo,
    DurableCall,
    LogAppendInput,
    LogRetention,
    LogSegment,
    RetryPolicy,
    now_ms,
)
from durability.cold import FileColdStorage
from durability.runtime import AlarmInvocationInfo, DurableObject
from durability.testing import VirtualClock

from ._inject import StorageFaults

OPERATIONS = 24
ALARM_NAMES = ("tick", "tock")


class Worker(DurableObject):
    """Durable operations and named alarms whose effects land in `env.EFFECTS`."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.effects: list[str] = env.EFFECTS
        retries = RetryPolicy(max_attempts=1_000, delay=lambda attempt: 1_000)
        self.scheduler = DurabilityScheduler(context=ctx)
        self.durability = Durability(
            scheduler=self.scheduler, handlers={"work": self._work}, retries=retries
        )
        self.alarms = DurabilityAlarms(
            scheduler=self.scheduler,
            handlers={name: self._fired for name in ALARM_NAMES},
            retries=retries,
        )

    async def _work(self, call: DurableCall) -> None:
        self.effects.append(f"op:{call.id}")

    async def _fired(self, info: DurableAlarmInfo) -> None:
        self.effects.append(f"alarm:{info.name}")

    async def submit(self, id: str) -> None:
        await self.durability.operation("work")(id=id)

    async def schedule(self, name: str, at_ms: int) -> None:
        await getattr(self.alarms, name)(at_ms)

    async def pending(self) -> int:
        """Operations and named alarms not yet done."""
        sql = self.ctx.storage.sql
        calls = sql.exec("SELECT COUNT(*) AS n FROM durability_calls WHERE status = 'pending'")
        alarms = sql.exec("SELECT COUNT(*) AS n FROM durability_alarms WHERE status = 'pending'")
        return int(calls.one()["n"]) + int(alarms.one()["n"])

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.scheduler.alarm(info)


FAULTS = {
    "object commit": ("WORKERS", "COMMIT", 3),
    "set_alarm write": ("WORKERS", "INSERT INTO _durability_alarm", 1),
    "catalog write": ("_catalog", "INSERT INTO alarms", 1),
}
"""Which statement fails, in which file, and one matching call in how many."""


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_everything_acknowledged_completes_after_faults_stop(
    tmp_path: Path,
    faults: StorageFaults,
    clock: VirtualClock,
    fault: str,
    make_runtime: MakeRuntime,
) -> None:
    """With one kind of write failing, acknowledged work still all completes once it stops.

    First the writes fail now and then while operations are submitted and named
    alarms scheduled; then every one fails for 30 s while only deliveries run (no call
    comes in to re-arm anything). The instance is evicted often, so only what is
    stored, never a live instance's timers, carries the work on.
    """
    effects: list[str] = []
    file_part, statement, every = FAULTS[fault]
    bindings = {"WORKERS": Worker, "EFFECTS": effects}
    acknowledged: set[str] = set()
    async with make_runtime(path=tmp_path, bindings=bindings) as rt:
        worker = rt.env.WORKERS.get_by_name("w")
        await worker.pending()
        rule = faults.fail(file_part, statement, times=10_000, every=every)
        for index in range(OPERATIONS):
            try:
                await worker.submit(f"o{index}")
                acknowledged.add(f"op:o{index}")
            except Exception:  # the injected failure, in whatever form it surfaces
                pass
            name = ALARM_NAMES[index % 2]
            try:
                await worker.schedule(name, clock.now_ms() + 5_000)
                acknowledged.add(f"alarm:{name}")
            except Exception:
                pass
            await clock.advance(700)
            if index % 3 == 2:
                await rt.evict(worker)
        assert rule.failed >= 2
        faults.stop()
        await worker.schedule("tick", clock.now_ms() + 1_000)
        await rt.evict(worker)
        done_before = set(effects)
        effects.clear()
        faults.fail(file_part, statement, times=10_000)
        await clock.advance(30_000)
        faults.stop()
        await rt.evict(worker)
        await clock.advance(600_000)
        assert "alarm:tick" in effects
        assert acknowledged <= done_before | set(effects)
        assert await worker.pending() == 0


class FlakyCold(FileColdStorage):
    """A file cold store whose writes fail while `failing` says so (after writing, at times)."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.failing = False
        self.failed = 0
        self.calls = 0

    async def write(self, segment: LogSegment[Any]) -> str:
        self.calls += 1
        if self.failing and self.calls % 2:
            self.failed += 1
            if self.calls % 4 == 1:
                # The file lands, then the write reports failure (as a lost reply would).
                await super().write(segment)
            raise OSError("cold store unavailable")
        return await super().write(segment)


class Partition(DurableObject):
    """A log trimmed by a self-rescheduling named alarm into `env.COLD`."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.scheduler = DurabilityScheduler(context=ctx)
        self.log: DurabilityLog[Any] = DurabilityLog(
            scheduler=self.scheduler,
            max_batch_size=4,
            retention=LogRetention(max_records=2),
            cold=env.COLD,
        )
        self.alarms = DurabilityAlarms(
            scheduler=self.scheduler,
            handlers={"trim": self._trim},
            retries=RetryPolicy(max_attempts=1_000, delay=lambda attempt: 1_000),
        )

    async def _trim(self, info: DurableAlarmInfo) -> None:
        await self.log.trim()
        await self.alarms.trim(now_ms() + 1_000)

    async def start(self) -> None:
        await self.alarms.trim(now_ms() + 1_000)

    async def append(self, bodies: list[int]) -> None:
        await self.log.append([LogAppendInput(body) for body in bodies])

    async def everything(self) -> dict[str, Any]:
        bodies, offset = [], 0
        while (page := await self.log.read(offset)).records:
            bodies += [record.body for record in page.records]
            offset = page.next_offset
        bounds = await self.log.bounds()
        return {"bodies": bodies, "hot": bounds.next_offset - bounds.hot_offset}

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.scheduler.alarm(info)


async def test_trim_under_failing_cold_writes_catches_up_once_they_stop(
    tmp_path: Path, clock: VirtualClock, make_runtime: MakeRuntime
) -> None:
    """Cold writes failing (some after the file landed) keep records hot; then trim catches up."""
    cold = FlakyCold(tmp_path / "cold")
    bindings = {"PARTS": Partition, "COLD": cold}
    async with make_runtime(path=tmp_path / "objects", bindings=bindings) as rt:
        part = rt.env.PARTS.get_by_name("p")
        await part.start()
        cold.failing = True
        for batch in range(10):
            await part.append(list(range(batch * 4, batch * 4 + 4)))
            await clock.advance(1_500)
            if batch % 3 == 2:
                await rt.evict(part)
        assert cold.failed >= 3
        cold.failing = False
        await rt.evict(part)
        await clock.advance(60_000)
        state = await part.everything()
    assert state == {"bodies": list(range(40)), "hot": 2}
