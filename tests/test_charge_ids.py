"""Charge ids of renewals: the slot's time survives a new subscription, its number does not.

docs/alarms.md names a billing period's charge by the slot's `scheduled_time`. These tests
unsubscribe and subscribe again and count the charges the payments service took, for that id
and for the slot number (`occurrence`), which restarts at 0 with the new recurrence.
"""

from __future__ import annotations

from typing import Any, ClassVar

from durability import Durable, DurableAlarmInfo, DurableCall, named_alarm, now_ms, operation
from durability.runtime import DurableObject, Runtime
from durability.testing import VirtualClock

PERIOD_MS = 30 * 86_400_000


class Payments:
    """A payments service that applies each idempotency key once."""

    def __init__(self) -> None:
        self.charged: list[str] = []

    async def charge(self, key: str) -> None:
        if key not in self.charged:
            self.charged.append(key)


class Subscription(Durable, DurableObject):
    """A monthly renewal that charges each period under `charge_id(info)`."""

    charge_id: ClassVar[staticmethod[[DurableAlarmInfo], str]]

    @operation
    async def charge(self, call: DurableCall[Any]) -> None:
        await self.env["PAYMENTS"].charge(call.idempotency_key)

    @named_alarm
    async def renew(self, info: DurableAlarmInfo) -> None:
        await self.charge(type(self).charge_id(info))

    async def subscribe(self) -> None:
        await self.renew.every(PERIOD_MS, start_at=now_ms() + PERIOD_MS)

    async def unsubscribe(self) -> None:
        await self.renew.cancel()


class BySlotTime(Subscription):
    """The documented id: the period's start."""

    charge_id = staticmethod(lambda info: f"period:{info.scheduled_time}")


class BySlotNumber(Subscription):
    """The id the docs used to recommend: the slot's number in its recurrence."""

    charge_id = staticmethod(lambda info: f"period:{info.occurrence}")


async def _charges_after_resubscribing(cls: type[Subscription]) -> int:
    payments = Payments()
    clock = VirtualClock()
    async with Runtime(bindings={"SUBS": cls, "PAYMENTS": payments}, clock=clock) as rt:
        acme = rt.env.SUBS.get_by_name("acme")
        await acme.subscribe()
        await clock.advance(2 * PERIOD_MS)
        await acme.unsubscribe()
        await clock.advance(PERIOD_MS)
        await acme.subscribe()
        await clock.advance(2 * PERIOD_MS)
    return len(payments.charged)


async def test_slot_time_ids_charge_every_period_after_resubscribing() -> None:
    """With the slot's time as the id, both periods of the new subscription are charged."""
    assert await _charges_after_resubscribing(BySlotTime) == 4


async def test_slot_number_ids_skip_the_new_subscriptions_periods() -> None:
    """With the slot number as the id, the new subscription's periods reuse the old ids
    and their charges are silently skipped: why the docs no longer recommend it."""
    assert await _charges_after_resubscribing(BySlotNumber) == 2
