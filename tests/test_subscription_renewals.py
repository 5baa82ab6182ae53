"""The subscription renewals example under a year of virtual time, crashes and failures."""

from __future__ import annotations

import asyncio
import json
import random
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import MakeRuntime
from durability.runtime import Request, Runtime
from durability.runtime.server import WorkerModule, load_worker
from durability.testing import VirtualClock

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "subscription_renewals"
DAY_MS = 24 * 60 * 60 * 1000
HOUR_MS = 60 * 60 * 1000


class PaymentsUnavailableError(Exception):
    """The fake payments service refused a charge this time; the caller retries."""


@dataclass(frozen=True, slots=True)
class Charge:
    """One charge the fake payments service accepted."""

    idempotency_key: str
    customer_id: str
    period_start: int


class PaymentsService:
    """A fake payments provider bound as PAYMENTS: one charge per key, injectable faults.

    It answers `getByName(name)` with itself, so it stands where the example's
    `Payments` namespace would. Each call takes a random latency below
    `max_latency_ms` and fails with probability `failure_rate`; `fail_next(count)`
    fails the next `count` calls. `calls` counts every call and `repeats` the calls
    for a key that was already charged.
    """

    def __init__(self, *, failure_rate: float, max_latency_ms: int, seed: int) -> None:
        self.failure_rate = failure_rate
        self.max_latency_ms = max_latency_ms
        self.calls = 0
        self.repeats = 0
        self._random = random.Random(seed)
        self._forced_failures = 0
        self._charges: dict[str, Charge] = {}

    def getByName(self, name: str) -> PaymentsService:
        return self

    def fail_next(self, count: int) -> None:
        self._forced_failures = count

    async def charge(self, idempotency_key: str, customer_id: str, period_start: int) -> str:
        """Charge once per key, committed halfway through the call's latency."""
        self.calls += 1
        await self._network_delay()
        if self._forced_failures > 0:
            self._forced_failures -= 1
            raise PaymentsUnavailableError("payments service unavailable")
        if self._random.random() < self.failure_rate:
            raise PaymentsUnavailableError("payments service unavailable")
        if idempotency_key in self._charges:
            self.repeats += 1
        else:
            self._charges[idempotency_key] = Charge(idempotency_key, customer_id, period_start)
        await self._network_delay()
        return idempotency_key

    async def _network_delay(self) -> None:
        if self.max_latency_ms:
            await asyncio.sleep(self._random.randrange(self.max_latency_ms) / 2000)

    def charges(self, customer_id: str | None = None) -> list[Charge]:
        return [c for c in self._charges.values() if customer_id in (None, c.customer_id)]


@dataclass
class Shop:
    """The example served by a file-backed runtime on a virtual clock."""

    worker: WorkerModule
    rt: Runtime
    clock: VirtualClock
    payments: PaymentsService
    period: int

    async def post(self, path: str) -> tuple[int, str]:
        response = await self.worker.fetch(
            Request(f"http://shop{path}", method="POST"), self.rt.env
        )
        return response.status, await response.text()

    async def get(self, path: str) -> tuple[int, str]:
        response = await self.worker.fetch(Request(f"http://shop{path}"), self.rt.env)
        return response.status, await response.text()

    async def state(self, customer: str) -> Any:
        status, body = await self.get(f"/{customer}")
        assert status == 200
        return json.loads(body)

    def stub(self, customer: str) -> Any:
        return self.rt.env.SUBSCRIPTIONS.get_by_name(customer)


@pytest.fixture
async def shop(
    tmp_path: Path, make_runtime: MakeRuntime, clock: VirtualClock
) -> AsyncIterator[Shop]:
    worker = load_worker(str(EXAMPLE))
    module = sys.modules[worker.name]
    payments = PaymentsService(failure_rate=0.25, max_latency_ms=5_000, seed=2024)
    bindings = {**worker.bindings, "PAYMENTS": payments}
    async with make_runtime(path=str(tmp_path), bindings=bindings) as rt:
        yield Shop(worker, rt, clock, payments, module.RENEWAL_PERIOD_MS)


async def test_http_surface(shop: Shop) -> None:
    """subscribe answers 201 with the first renewal, GET shows state, cancel clears it."""
    period = shop.period
    status, body = await shop.post("/alice/subscribe")
    assert status == 201
    assert json.loads(body) == {
        "subscribed": "alice",
        "next_renewal_at": shop.clock.now_ms() + period,
    }
    assert await shop.state("alice") == {
        "customer_id": "alice",
        "next_renewal_at": shop.clock.now_ms() + period,
    }
    assert await shop.post("/alice/cancel") == (200, "cancelled")
    assert await shop.state("alice") == {"customer_id": None, "next_renewal_at": None}
    assert (await shop.post("/alice/refund"))[0] == 404
    assert (await shop.post("/"))[0] == 404
    assert (await shop.get("/alice/subscribe"))[0] == 405


@pytest.mark.parametrize("period", ["99999999999999999999999", "abc", "0", "-5", "1.5", ""])
async def test_a_bad_period_answers_400_and_writes_nothing(shop: Shop, period: str) -> None:
    """A period that is not 1 s to ten years answers 400 naming it; nothing is stored."""
    status, body = await shop.post(f"/carol/subscribe?period={period}")
    assert (status, body) == (400, "period must be a whole number of seconds from 1 to 316224000\n")
    assert await shop.state("carol") == {"customer_id": None, "next_renewal_at": None}


async def test_subscribe_checks_its_arguments_before_writing(shop: Shop) -> None:
    """The object's `subscribe` refuses a bad period with ValueError and stores nothing."""
    with pytest.raises(ValueError, match="period_ms must be a whole number from 1000"):
        await shop.stub("carol").subscribe("carol", 10**26)
    with pytest.raises(ValueError, match="customer_id must be a non-empty string"):
        await shop.stub("carol").subscribe("", 60_000)
    assert await shop.state("carol") == {"customer_id": None, "next_renewal_at": None}


async def test_a_wrong_method_answers_405_with_the_allowed_one(shop: Shop) -> None:
    """A known route asked with the wrong method answers 405 and names the right one."""
    for method, path, allowed in [
        ("GET", "/alice/subscribe", "POST"),
        ("DELETE", "/alice/cancel", "POST"),
        ("POST", "/alice", "GET"),
        ("PUT", "/alice/charges", "GET"),
    ]:
        response = await shop.worker.fetch(
            Request(f"http://shop{path}", method=method), shop.rt.env
        )
        assert (response.status, response.headers.get("allow")) == (405, allowed), path
        assert await response.text() == f"{method} is not allowed here: use {allowed}\n"
    assert await shop.state("alice") == {"customer_id": None, "next_renewal_at": None}


async def test_repeated_subscribe_replaces_the_pending_renewal(shop: Shop) -> None:
    """Subscribing twice keeps one renewal schedule: one charge per period, from the last."""
    period = shop.period
    await shop.post("/bob/subscribe")
    await shop.clock.advance(DAY_MS)
    await shop.post("/bob/subscribe")
    second = shop.clock.now_ms()
    await shop.clock.advance(2 * period + DAY_MS)
    starts = [charge.period_start for charge in shop.payments.charges("bob")]
    assert starts == [second + period, second + 2 * period]


async def test_failed_charges_are_retried_until_accepted(shop: Shop) -> None:
    """A charge refused three times is retried by the operation and accepted once."""
    shop.payments.failure_rate = 0.0
    await shop.post("/dave/subscribe")
    shop.payments.fail_next(3)
    await shop.clock.advance(shop.period + 60_000)
    assert shop.payments.calls == 4
    assert [charge.customer_id for charge in shop.payments.charges()] == ["dave"]


async def test_a_year_with_crashes_and_failing_payments(shop: Shop) -> None:
    """A year of renewals: exactly one charge per customer per period, none after cancel."""
    rng = random.Random(7)
    period = shop.period
    start = shop.clock.now_ms()
    customers = [f"customer-{i}" for i in range(6)]
    subscribed_at: dict[str, int] = {}
    for customer in customers:
        await shop.clock.advance(rng.randrange(1, 2 * DAY_MS))
        assert (await shop.post(f"/{customer}/subscribe"))[0] == 201
        subscribed_at[customer] = shop.clock.now_ms()
    # Two customers cancel mid-period, far from any renewal.
    cancel_at = {
        customers[1]: subscribed_at[customers[1]] + 3 * period + period // 2,
        customers[4]: subscribed_at[customers[4]] + 7 * period + period // 3,
    }
    end = start + 370 * DAY_MS
    resets = 0
    while shop.clock.now_ms() < end:
        now = shop.clock.now_ms()
        due, customer = min(
            (at + ((now - at) // period + 1) * period, customer)
            for customer, at in subscribed_at.items()
        )
        if due - now < 2 * DAY_MS and rng.random() < 0.7:
            # Just after a renewal, while its charge may be in flight or waiting to retry.
            target = due + rng.randrange(0, 10_000)
        else:
            target = now + rng.randrange(HOUR_MS, 2 * DAY_MS)
            customer = rng.choice(customers)
        for cancelled, at in sorted(cancel_at.items(), key=lambda item: item[1]):
            if now < at <= target:
                await shop.clock.advance_to(at)
                assert await shop.post(f"/{cancelled}/cancel") == (200, "cancelled")
        await shop.clock.advance_to(min(target, end))
        roll = rng.random()
        if roll < 0.5:
            await shop.rt.crash(shop.stub(customer))
            resets += 1
        elif roll < 0.8:
            await shop.rt.evict(shop.stub(customer))
            resets += 1
    assert resets > 100
    assert shop.payments.calls > len(shop.payments.charges())  # some calls failed first
    assert shop.payments.repeats > 0  # and some charges were redelivered after a reset
    for customer in customers:
        stop = cancel_at.get(customer, end)
        expected = [
            subscribed_at[customer] + k * period
            for k in range(1, 14)
            if subscribed_at[customer] + k * period < stop
        ]
        charges = shop.payments.charges(customer)
        assert [charge.period_start for charge in charges] == expected, customer
        assert len({charge.idempotency_key for charge in charges}) == len(charges)
    for customer in cancel_at:
        assert await shop.state(customer) == {"customer_id": None, "next_renewal_at": None}


async def test_a_period_renewed_twice_is_charged_once(
    tmp_path: Path, make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """Charges dedupe per billing period, not per alarm occurrence: a period whose renewal
    runs again (an operator restarts the recurrence from it) is not charged a second time."""
    worker = load_worker(str(EXAMPLE))
    module = sys.modules[worker.name]

    class Operated(module.Subscription):  # type: ignore[name-defined]
        """The example's object plus what an operator re-running a renewal would call."""

        async def renew_again(self, period_start: int, period_ms: int) -> None:
            await self.renew.every(period_ms, start_at=period_start)

    payments = PaymentsService(failure_rate=0.0, max_latency_ms=0, seed=1)
    bindings = {**worker.bindings, "SUBSCRIPTIONS": Operated, "PAYMENTS": payments}
    async with make_runtime(path=str(tmp_path), bindings=bindings) as rt:
        period = module.RENEWAL_PERIOD_MS
        frank = rt.env.SUBSCRIPTIONS.get_by_name("frank")
        first = await frank.subscribe("frank")
        await clock.advance(period + DAY_MS)
        assert [c.period_start for c in payments.charges()] == [first]
        await frank.renew_again(first, period)
        await clock.advance(DAY_MS)
        assert [c.period_start for c in payments.charges()] == [first]
        assert payments.calls == 1  # the charge was already settled: not even attempted
        await clock.advance(period)
        assert [c.period_start for c in payments.charges()] == [first, first + period]
        assert payments.repeats == 0


async def test_purge_history_removes_old_settled_charges(shop: Shop) -> None:
    """purge_history deletes charge records older than the retention window only."""
    period = shop.period
    await shop.post("/carol/subscribe")
    await shop.clock.advance(5 * period + DAY_MS)
    assert len(shop.payments.charges("carol")) == 5
    purged = await shop.stub("carol").purge_history()
    assert purged["operations"] == 2
    assert purged["alarms"] == 0


async def test_the_example_payments_object_takes_each_charge_once(
    tmp_path: Path, make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """With the example's own Payments object bound, each renewal charges it exactly once."""
    worker = load_worker(str(EXAMPLE))
    async with make_runtime(path=str(tmp_path), bindings=worker.bindings) as rt:
        module = sys.modules[worker.name]
        started = clock.now_ms()
        subscribe = Request("http://shop/erin/subscribe", method="POST")
        assert (await worker.fetch(subscribe, rt.env)).status == 201
        await clock.advance(2 * module.RENEWAL_PERIOD_MS + DAY_MS)
        provider = rt.env.PAYMENTS.getByName(module.PROVIDER)
        assert await provider.charges("erin") == [
            started + module.RENEWAL_PERIOD_MS,
            started + 2 * module.RENEWAL_PERIOD_MS,
        ]
