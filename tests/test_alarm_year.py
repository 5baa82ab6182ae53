"""A year of recurring named alarms through evictions, crashes and a stopped runtime.

The databases are real SQLite files; they live on a RAM-backed directory when the
machine has one, so the year of commits takes seconds.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from _alarm_probe import Clockwork
from _probe import Probe
from conftest import MakeRuntime
from durability import Durable, DurableAlarmInfo, named_alarm, now_ms
from durability.runtime import DurableObject, ObjectStub, Runtime
from durability.testing import VirtualClock

PARIS = ZoneInfo("Europe/Paris")
HOUR = 3_600_000
DAY = 24 * HOUR
YEAR_START = round(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
YEAR_END = round(datetime(2027, 1, 1, tzinfo=UTC).timestamp() * 1000)
HANDLER_MS = 500
"""How long each occurrence's handler takes (virtual time), so crashes can land inside."""


@pytest.fixture
def fast_path(tmp_path: Path) -> Iterator[Path]:
    """A directory for the runtime's SQLite files, in RAM when the machine has /dev/shm."""
    shm = Path("/dev/shm")
    if not shm.is_dir():
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(dir=shm) as directory:
        yield Path(directory)


class Calendar(Durable, DurableObject):
    """An hourly and a daily 09:00 Paris recurrence recording one effect per occurrence.

    An effect is keyed by the occurrence's idempotency key, so a retried occurrence
    (after a crash) records it once.
    """

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS effects (key TEXT PRIMARY KEY, name TEXT NOT NULL, "
            "occurrence INTEGER NOT NULL, slot INTEGER NOT NULL, ran_at INTEGER NOT NULL)"
        )

    @named_alarm
    async def hourly(self, info: DurableAlarmInfo) -> None:
        await self._effect(info)

    @named_alarm
    async def daily(self, info: DurableAlarmInfo) -> None:
        await self._effect(info)

    async def _effect(self, info: DurableAlarmInfo) -> None:
        self.ctx.storage.sql.exec(
            "INSERT INTO effects (key, name, occurrence, slot, ran_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (key) DO NOTHING",
            info.idempotency_key,
            info.name,
            info.occurrence,
            info.scheduled_time,
            now_ms(),
        )
        await asyncio.sleep(HANDLER_MS / 1000)

    async def start(self) -> None:
        await self.hourly.every(HOUR, start_at=now_ms() + HOUR)
        await self.daily.cron("0 9 * * *", tz="Europe/Paris", catch_up="all")

    async def effects(self, name: str) -> list[list[int]]:
        cursor = self.ctx.storage.sql.exec(
            "SELECT occurrence, slot, ran_at FROM effects WHERE name = ? ORDER BY rowid", name
        )
        return [[row["occurrence"], row["slot"], row["ran_at"]] for row in cursor]


@asynccontextmanager
async def running(path: Path, clock: VirtualClock) -> AsyncIterator[tuple[Runtime, ObjectStub]]:
    """The runtime on `path`; only the test evicts (no idle eviction between slots)."""
    bindings = {"CALENDAR": Calendar}
    async with Runtime(bindings=bindings, clock=clock, path=path, idle_evict_ms=None) as rt:
        yield rt, rt.env.CALENDAR.get_by_name("calendar")


async def live_months(rt: Runtime, stub: ObjectStub, clock: VirtualClock, until: int) -> None:
    """Advance to `until` in random steps of up to three days, crashing or evicting the
    object after some of them; some steps end while an hourly handler is running."""
    rng = random.Random(until)
    while clock.now_ms() < until:
        if rng.random() < 0.3:
            slot = (clock.now_ms() // HOUR + 1 + rng.randrange(48)) * HOUR
            target = slot + rng.randrange(1, HANDLER_MS)
        else:
            target = clock.now_ms() + rng.randrange(1, 72 * HOUR)
        await clock.advance_to(min(target, until))
        roll = rng.random()
        if roll < 0.25:
            await rt.crash(stub)
        elif roll < 0.5:
            await rt.evict(stub)


def daily_slots(first: date, last_ms: int) -> list[int]:
    """Every 09:00 in Paris from `first` up to `last_ms`, as epoch milliseconds."""
    slots: list[int] = []
    day = first
    while True:
        at = round(datetime(day.year, day.month, day.day, 9, tzinfo=PARIS).timestamp() * 1000)
        if at > last_ms:
            return slots
        slots.append(at)
        day += timedelta(days=1)


@pytest.mark.slow
async def test_a_year_of_hourly_and_daily_paris_slots(fast_path: Path) -> None:
    """Each hourly and each 09:00 Paris slot runs exactly once, in order, never early,
    through random evictions and crashes; across a stopped runtime the hourly one
    ("latest") runs only its latest missed slot and the daily one ("all") every one."""
    clock = VirtualClock(YEAR_START)
    stop_at = YEAR_START + 200 * DAY + HOUR // 2
    reopen_at = stop_at + 3 * DAY + 5 * HOUR
    async with running(fast_path, clock) as (rt, stub):
        await stub.start()
        await live_months(rt, stub, clock, stop_at)
    await clock.advance_to(reopen_at)
    async with running(fast_path, clock) as (rt, stub):
        await live_months(rt, stub, clock, YEAR_END)
        hourly = await stub.effects("hourly")
        daily = await stub.effects("daily")

    end = YEAR_END
    all_hours = list(range(YEAR_START + HOUR, end + 1, HOUR))
    missed = [at for at in all_hours if stop_at < at < reopen_at - HOUR]
    assert len(missed) == 3 * 24 + 4
    expected_hours = [at for at in all_hours if at not in missed]
    assert [slot for _, slot, _ in hourly] == expected_hours
    assert [occurrence for occurrence, _, _ in hourly] == [
        (at - YEAR_START) // HOUR - 1 for at in expected_hours
    ]
    expected_days = daily_slots(date(2026, 1, 1), end)
    assert len(expected_days) == 365
    assert [slot for _, slot, _ in daily] == expected_days
    assert [occurrence for occurrence, _, _ in daily] == list(range(365))
    for effects in (hourly, daily):
        assert all(ran_at >= slot for _, slot, ran_at in effects)
        assert [ran_at for _, _, ran_at in effects] == sorted(ran_at for _, _, ran_at in effects)
    late = [ran_at - slot for _, slot, ran_at in daily if stop_at < slot < reopen_at]
    assert len(late) == 3 and all(delay > 0 for delay in late)


async def test_catch_up_all_runs_at_most_the_latest_thousand_slots(
    fast_path: Path, make_runtime: MakeRuntime
) -> None:
    """Down across 1,500 slots, "all" runs the latest 1,000 of them, in order."""
    probe = Probe()
    clock = VirtualClock(YEAR_START)
    bindings = {"CLOCKWORK": Clockwork, "PROBE": probe}
    async with make_runtime(bindings=bindings, clock=clock, path=fast_path) as rt:
        stub = rt.env["CLOCKWORK"].get_by_name("a")
        await stub.call("tick", "every", 1_000, start_at=YEAR_START + 1_000, catch_up="all")
    await clock.advance(1_500_000)
    async with make_runtime(bindings=bindings, clock=clock, path=fast_path) as rt:
        await clock.run_until_idle()
        assert [info.occurrence for info in probe.runs] == list(range(500, 1_500))
        assert clock.now_ms() == YEAR_START + 1_500_000
