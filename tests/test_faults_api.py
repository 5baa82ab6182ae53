"""`Runtime(faults=...)`: each fault point of `durability.testing.Faults` is asked where
production can fail, and the runtime fails there through its own failure paths."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from conftest import MakeRuntime
from durability import DurabilityLog, DurabilityScheduler, LogAppendInput, LogRetention, now_ms
from durability.cold import FileColdStorage
from durability.runtime import DurableObject, ObjectEvictedError, ObjectId, Runtime
from durability.testing import CommitFault, Faults, VirtualClock


class Notes(DurableObject):
    """KV writes, its alarm, and a log of what rang."""

    async def put(self, key: str, value: int) -> int:
        await self.ctx.storage.put(key, value)
        return value

    async def get(self, key: str) -> Any:
        return await self.ctx.storage.get(key)

    async def arm(self, at_ms: int) -> None:
        await self.ctx.storage.set_alarm(at_ms)

    async def alarm(self, info: Any = None) -> None:
        self.env.RANG.append((self.ctx.id.name, now_ms()))


class Planned(Faults):
    """Answers each point from a plan the test fills in, and records what it was asked."""

    def __init__(self) -> None:
        self.commits: list[CommitFault | None] = []
        self.asked: list[tuple[str, str | None]] = []
        self.delays: dict[str, int] = {}
        self.refuse_alarms = False
        self.cold: dict[str, int] = {}

    def commit(self, object_id: ObjectId) -> CommitFault | None:
        self.asked.append(("commit", object_id.name))
        return self.commits.pop(0) if self.commits else None

    def set_alarm(self, object_id: ObjectId, scheduled_ms: int) -> None:
        self.asked.append(("set_alarm", object_id.name))
        if self.refuse_alarms:
            raise sqlite3.OperationalError("injected: set_alarm")

    def alarm_delay_ms(self, object_id: ObjectId, scheduled_ms: int) -> int:
        return self.delays.get(str(object_id.name), 0)

    def cold_store(self, object_id: ObjectId | None, action: str) -> None:
        self.asked.append((f"cold {action}", None if object_id is None else object_id.name))
        if self.cold.get(action, 0) > 0:
            self.cold[action] -= 1
            raise OSError(f"injected: cold {action}")


@pytest.fixture
def planned() -> Planned:
    return Planned()


async def test_a_failed_commit_reaches_the_caller_and_keeps_nothing(
    tmp_path: Path, planned: Planned, make_runtime: MakeRuntime
) -> None:
    """ "fail": the call gets a storage error, its writes are gone, the object works again."""
    async with make_runtime(path=tmp_path, bindings={"NOTES": Notes}, faults=planned) as rt:
        notes = rt.env.NOTES.get_by_name("a")
        await notes.put("k", 1)
        planned.commits.append("fail")
        with pytest.raises(sqlite3.OperationalError, match=r"injected by Faults\.commit"):
            await notes.put("k", 2)
        assert await notes.get("k") == 1
        assert await notes.put("k", 3) == 3
    assert ("commit", "a") in planned.asked


async def test_a_crash_before_the_commit_loses_the_writes(
    tmp_path: Path, planned: Planned, make_runtime: MakeRuntime
) -> None:
    """ "crash": the caller learns the object was evicted; the turn's writes never landed."""
    async with make_runtime(path=tmp_path, bindings={"NOTES": Notes}, faults=planned) as rt:
        notes = rt.env.NOTES.get_by_name("a")
        await notes.put("k", 1)
        planned.commits.append("crash")
        with pytest.raises(ObjectEvictedError):
            await notes.put("k", 2)
    async with make_runtime(path=tmp_path, bindings={"NOTES": Notes}) as rt:
        assert await rt.env.NOTES.get_by_name("a").get("k") == 1


async def test_a_crash_after_the_commit_keeps_the_writes_and_loses_the_reply(
    tmp_path: Path, planned: Planned, make_runtime: MakeRuntime
) -> None:
    """ "crash_after": the caller gets no reply, yet what the call wrote is on disk."""
    async with make_runtime(path=tmp_path, bindings={"NOTES": Notes}, faults=planned) as rt:
        notes = rt.env.NOTES.get_by_name("a")
        planned.commits.append("crash_after")
        with pytest.raises(ObjectEvictedError):
            await notes.put("k", 2)
    async with make_runtime(path=tmp_path, bindings={"NOTES": Notes}) as rt:
        assert await rt.env.NOTES.get_by_name("a").get("k") == 2


async def test_reads_alone_are_no_commit_point(planned: Planned, make_runtime: MakeRuntime) -> None:
    """A turn that only read is not asked about: a commit point is a turn that wrote."""
    async with make_runtime(bindings={"NOTES": Notes}, faults=planned) as rt:
        notes = rt.env.NOTES.get_by_name("a")
        await notes.put("k", 1)
        await notes.get("k")
        await notes.get("k")
    assert planned.asked == [("commit", "a")]


async def test_a_refused_set_alarm_fails_the_call_and_arms_nothing(
    planned: Planned, make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """`Faults.set_alarm` raising fails that call with its error; no alarm is armed."""
    rang: list[Any] = []
    async with make_runtime(bindings={"NOTES": Notes, "RANG": rang}, faults=planned) as rt:
        planned.refuse_alarms = True
        with pytest.raises(sqlite3.OperationalError, match="injected: set_alarm"):
            await rt.env.NOTES.get_by_name("a").arm(clock.now_ms() + 1_000)
        await clock.advance(10_000)
    assert rang == []


async def test_alarm_delays_reorder_the_deliveries_of_two_objects(
    planned: Planned, make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """An alarm is delivered as late as `alarm_delay_ms` says, never early, so two
    objects' alarms may ring in the other order."""
    rang: list[Any] = []
    planned.delays["first"] = 5_000
    async with make_runtime(bindings={"NOTES": Notes, "RANG": rang}, faults=planned) as rt:
        start = clock.now_ms()
        await rt.env.NOTES.get_by_name("first").arm(start + 1_000)
        await rt.env.NOTES.get_by_name("second").arm(start + 2_000)
        await clock.advance(10_000)
    assert rang == [("second", start + 2_000), ("first", start + 6_000)]


class Archive(DurableObject):
    """A log trimmed after one record, to a cold store in a folder of the environment."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.log: DurabilityLog[Any] = DurabilityLog(
            scheduler=DurabilityScheduler(context=ctx),
            retention=LogRetention(max_records=1),
            cold=FileColdStorage(env.COLD),
        )

    async def append(self, body: str) -> None:
        await self.log.append([LogAppendInput(body)])

    async def trim(self) -> None:
        await self.log.trim()

    async def read(self, offset: int) -> list[str]:
        return [str(record.body) for record in (await self.log.read(offset, limit=10)).records]


async def test_cold_store_faults_keep_records_hot_until_a_write_succeeds(
    tmp_path: Path, planned: Planned, make_runtime: MakeRuntime
) -> None:
    """A cold write failing before or after it landed keeps the records hot and readable;
    the next trim moves them, and a read fault fails only that read."""
    async with make_runtime(
        bindings={"ARCHIVE": Archive, "COLD": str(tmp_path / "cold")}, faults=planned
    ) as rt:
        archive = rt.env.ARCHIVE.get_by_name("a")
        for body in ("x", "y", "z"):
            await archive.append(body)
        planned.cold.update({"write": 1, "written": 1})
        for _ in range(2):
            with pytest.raises(OSError, match="injected: cold"):
                await archive.trim()
            assert await archive.read(0) == ["x", "y", "z"]
        await archive.trim()
        planned.cold["read"] = 1
        with pytest.raises(OSError, match="injected: cold read"):
            await archive.read(0)
        assert await archive.read(0) == ["x", "y"]  # one cold segment
        assert await archive.read(2) == ["z"]  # the hot record
    assert [what for what, name in planned.asked if what.startswith("cold")] == [
        "cold write",
        "cold write",
        "cold written",
        "cold write",
        "cold written",
        "cold read",
        "cold read",
    ]


def test_faults_must_be_a_faults() -> None:
    """Anything but a `Faults` is refused at construction, naming the option."""
    with pytest.raises(TypeError, match=r"faults must be a durability\.testing\.Faults"):
        Runtime(faults=object())  # type: ignore[arg-type]
