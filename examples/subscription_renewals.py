"""Subscription renewals: recurring named alarms that register durable charges.

One `Subscription` object per customer. Subscribing schedules a `renew` named alarm one
period ahead. When it fires, the handler registers a durable `charge_invoice` operation
(retried on its own if the payments service fails) whose id is the alarm occurrence's
idempotency key, then schedules the next occurrence. Scheduling a name again replaces
its pending occurrence, so subscribing twice is harmless; cancelling stops the next
renewal from charging or rescheduling.

Serve it with ``durability serve examples/subscription_renewals.py`` and try::

    curl -X POST localhost:8787/alice/subscribe
    curl localhost:8787/alice
    curl -X POST localhost:8787/alice/cancel

The payments service is a binding too: here a plain Python object that deduplicates
charges by idempotency key (as a real provider does) and can be told to fail.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from durability import (
    Durability,
    DurabilityAlarms,
    DurabilityScheduler,
    DurableAlarmInfo,
    DurableCall,
    RetryPolicy,
    now_ms,
)
from durability.runtime import AlarmInvocationInfo, DurableObject, Request, Response

RENEWAL_PERIOD_MS = 30 * 24 * 60 * 60 * 1000
"""Thirty days between charges."""

HISTORY_RETENTION_MS = 90 * 24 * 60 * 60 * 1000
"""Settled records older than this are removed by `purge_history`."""


class PaymentsUnavailableError(Exception):
    """The payments service refused a charge this time; the caller retries."""


@dataclass(frozen=True, slots=True)
class Charge:
    """One charge the payments service accepted."""

    idempotency_key: str
    customer_id: str
    period_start: int


class PaymentsService:
    """A fake payments provider: one charge per idempotency key, with injectable faults.

    Each call takes a random latency below `max_latency_ms` and fails with probability
    `failure_rate` (both drawn from a generator seeded with `seed`); `fail_next(count)`
    makes the next `count` calls fail. `calls` counts every call and `repeats` the calls
    for a key that was already charged.
    """

    def __init__(
        self, *, failure_rate: float = 0.0, max_latency_ms: int = 0, seed: int | None = None
    ) -> None:
        if not 0.0 <= failure_rate < 1.0:
            raise ValueError("failure_rate must be in [0, 1)")
        if max_latency_ms < 0:
            raise ValueError("max_latency_ms must be >= 0")
        self.failure_rate = failure_rate
        self.max_latency_ms = max_latency_ms
        self.calls = 0
        self.repeats = 0
        self._random = random.Random(seed)
        self._forced_failures = 0
        self._charges: dict[str, Charge] = {}

    def fail_next(self, count: int) -> None:
        """Make the next `count` charge calls fail."""
        self._forced_failures = count

    async def charge(self, *, idempotency_key: str, customer_id: str, period_start: int) -> Charge:
        """Charge once per key; a repeated key returns the first charge unchanged.

        The charge is committed halfway through the call's latency, so a caller that
        goes away while waiting for the answer may have been charged anyway.
        """
        self.calls += 1
        await self._network_delay()
        if self._forced_failures > 0:
            self._forced_failures -= 1
            raise PaymentsUnavailableError("payments service unavailable")
        if self._random.random() < self.failure_rate:
            raise PaymentsUnavailableError("payments service unavailable")
        charge = self._charges.get(idempotency_key)
        if charge is None:
            charge = Charge(idempotency_key, customer_id, period_start)
            self._charges[idempotency_key] = charge
        else:
            self.repeats += 1
        await self._network_delay()
        return charge

    async def _network_delay(self) -> None:
        if self.max_latency_ms:
            await asyncio.sleep(self._random.randrange(self.max_latency_ms) / 2000)

    def charges(self, customer_id: str | None = None) -> list[Charge]:
        """Accepted charges (of one customer, if given), in the order they were made."""
        return [c for c in self._charges.values() if customer_id in (None, c.customer_id)]


class Subscription(DurableObject):
    """One customer's subscription: a recurring `renew` alarm and durable charges."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        # Both helpers share one scheduler: it owns the object's single alarm and one
        # concurrency pool for every handler.
        self.scheduler = DurabilityScheduler(context=ctx, alarm_concurrency=5)
        self.durability = Durability(
            scheduler=self.scheduler,
            handlers={"charge_invoice": self._charge_invoice},
            retries=RetryPolicy(max_attempts=8),
        )
        self.alarms = DurabilityAlarms(scheduler=self.scheduler, handlers={"renew": self._renew})

    async def _charge_invoice(self, call: DurableCall) -> None:
        payload = call.payload
        assert isinstance(payload, dict)
        await self.env["PAYMENTS"].charge(
            idempotency_key=call.id,
            customer_id=payload["customer_id"],
            period_start=payload["period_start"],
        )

    async def _renew(self, info: DurableAlarmInfo) -> None:
        customer_id = await self.ctx.storage.get("customer_id")
        if customer_id is None:
            return  # Cancelled: this occurrence completes without charging or renewing.
        # The occurrence's idempotency key is stable across its retries, so a retried
        # renewal registers the same charge again, which is a no-op.
        await self.durability.charge_invoice(
            id=info.idempotency_key,
            payload={"customer_id": customer_id, "period_start": info.scheduled_time},
        )
        await self._schedule_renewal(info.scheduled_time + RENEWAL_PERIOD_MS)

    async def _schedule_renewal(self, at_ms: int) -> None:
        """Schedule (or move) the next renewal and remember when it is."""
        await self.alarms.renew(at_ms)
        await self.ctx.storage.put("next_renewal_at", at_ms)

    async def subscribe(self, customer_id: str) -> int:
        """Start (or restart) the subscription; returns when the first renewal is due."""
        await self.ctx.storage.put("customer_id", customer_id)
        first = now_ms() + RENEWAL_PERIOD_MS
        await self._schedule_renewal(first)
        return first

    async def cancel(self) -> None:
        """Stop renewing: the next occurrence finds no customer and does nothing."""
        await self.ctx.storage.delete("customer_id")
        await self.ctx.storage.delete("next_renewal_at")

    async def state(self) -> dict[str, Any]:
        """The customer and the next renewal time (None when not subscribed)."""
        return {
            "customer_id": await self.ctx.storage.get("customer_id"),
            "next_renewal_at": await self.ctx.storage.get("next_renewal_at"),
        }

    async def purge_history(self) -> dict[str, int]:
        """Destructive retention: remove settled records older than 90 days."""
        cutoff = now_ms() - HISTORY_RETENTION_MS
        return {
            "operations": await self.durability.purge_before(cutoff),
            "alarms": await self.alarms.purge_before(cutoff),
        }

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.scheduler.alarm(info)


bindings: dict[str, Any] = {"SUBSCRIPTIONS": Subscription, "PAYMENTS": PaymentsService()}


async def fetch(request: Request, env: Any) -> Response:
    """`POST /{customer}/subscribe`, `POST /{customer}/cancel`, `GET /{customer}`."""
    parts = [part for part in urlsplit(request.url).path.split("/") if part]
    if not parts:
        return Response("Expected POST /{customer}/(subscribe|cancel) or GET /{customer}", 404)
    subscription = env["SUBSCRIPTIONS"].get_by_name(parts[0])
    if request.method == "GET" and len(parts) == 1:
        return Response.json(await subscription.state())
    if request.method != "POST" or len(parts) != 2:
        return Response("Not found", status=404)
    if parts[1] == "subscribe":
        first = await subscription.subscribe(parts[0])
        return Response.json({"subscribed": parts[0], "next_renewal_at": first}, status=201)
    if parts[1] == "cancel":
        await subscription.cancel()
        return Response("cancelled")
    return Response("Not found", status=404)
