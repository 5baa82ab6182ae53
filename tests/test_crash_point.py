"""`durability.testing.crash_point`: crashing an object in the middle of its own handler."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from conftest import MakeRuntime
from durability import Durable, DurableCall, named_alarm, now_ms, operation
from durability.runtime import DurableObject, ObjectEvictedError
from durability.testing import VirtualClock, crash_point


class Notes(DurableObject):
    """Writes a note, then crashes before the call ends when asked to."""

    async def add(self, text: str, crash: bool = False) -> int:
        sql = self.ctx.storage.sql
        sql.exec("CREATE TABLE IF NOT EXISTS notes (text TEXT NOT NULL)")
        sql.exec("INSERT INTO notes VALUES (?)", text)
        if crash:
            await crash_point()
            sql.exec("INSERT INTO notes VALUES ('after the crash point')")
        return int(sql.exec("SELECT count(*) AS n FROM notes").one()["n"])

    async def texts(self) -> list[str]:
        sql = self.ctx.storage.sql
        sql.exec("CREATE TABLE IF NOT EXISTS notes (text TEXT NOT NULL)")
        return [row["text"] for row in sql.exec("SELECT text FROM notes ORDER BY rowid")]


async def test_a_crash_point_loses_the_calls_uncommitted_writes(
    tmp_path: Any, make_runtime: MakeRuntime
) -> None:
    """The caller gets ObjectEvictedError, the call's writes are gone, the next call works."""
    async with make_runtime(path=tmp_path, bindings={"NOTES": Notes}) as rt:
        notes = rt.env.NOTES.get_by_name("a")
        assert await notes.add("kept") == 1
        with pytest.raises(ObjectEvictedError):
            await notes.add("lost", crash=True)
        assert await notes.texts() == ["kept"]
        assert await notes.add("next") == 2
    async with make_runtime(path=tmp_path, bindings={"NOTES": Notes}) as rt:
        assert await rt.env.NOTES.get_by_name("a").texts() == ["kept", "next"]


class Payments:
    """Takes charges; `crash_after` names keys whose first charge crashes its caller."""

    def __init__(self, crash_after: int = 0) -> None:
        self.charged: list[str] = []
        self._crashes_left = crash_after

    async def charge(self, key: str) -> None:
        self.charged.append(key)  # the effect happened...
        if self._crashes_left:
            self._crashes_left -= 1
            await crash_point()  # ...and the caller dies before recording it


class Billing(Durable, DurableObject):
    """Charges through PAYMENTS under `call.idempotency_key`, or a fresh id per attempt."""

    @operation
    async def charge(self, call: DurableCall[Any]) -> None:
        key = call.idempotency_key if call.payload["stable"] else uuid.uuid4().hex
        await self.env["PAYMENTS"].charge(key)

    async def bill(self, stable: bool) -> None:
        await self.charge("invoice-1", {"stable": stable})

    async def status(self) -> list[Any]:
        result = await self.charge.get_result("invoice-1")
        return [result.status, result.attempt]


@pytest.mark.parametrize(("stable", "distinct_keys"), [(True, 1), (False, 2)])
async def test_a_crash_after_the_effect_retries_the_handler(
    stable: bool, distinct_keys: int, make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """A handler crashed after its effect runs again: a stable idempotency key makes the
    repeat harmless, a key drawn per attempt shows up as a second, different charge."""
    payments = Payments(crash_after=1)
    async with make_runtime(bindings={"BILLING": Billing, "PAYMENTS": payments}) as rt:
        billing = rt.env.BILLING.get_by_name("acme")
        await billing.bill(stable)
        await clock.advance(60_000)
        assert await billing.status() == ["completed", 2]
    assert len(payments.charged) == 2
    assert len(set(payments.charged)) == distinct_keys


class Reminder(Durable, DurableObject):
    """A named alarm that records each ring, crashing on the first one."""

    @named_alarm
    async def ring(self, info: Any) -> None:
        rings = await self.ctx.storage.get("rings") or 0
        await self.ctx.storage.put("rings", rings + 1)
        if info.attempt == 1:
            await crash_point()

    async def arm(self) -> None:
        await self.ring(now_ms() + 1_000)

    async def rings(self) -> int:
        return int(await self.ctx.storage.get("rings") or 0)

    async def pending(self) -> bool:
        return await self.ring.get() is not None


async def test_a_named_alarm_crashed_mid_handler_is_retried_without_its_writes(
    make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """The first ring's write is lost with the crash; the retry rings once more and sticks."""
    async with make_runtime(bindings={"REMINDERS": Reminder}) as rt:
        reminder = rt.env.REMINDERS.get_by_name("r")
        await reminder.arm()
        await clock.advance(60_000)
        assert await reminder.rings() == 1
        assert not await reminder.pending()


async def test_crash_point_outside_an_object_says_where_it_works() -> None:
    """Awaited outside an object's call, crash_point raises RuntimeError saying so."""
    with pytest.raises(RuntimeError, match="inside a call, alarm or durable handler"):
        await crash_point()
