"""Subscription renewals: recurring named alarms that register durable charges.

One `Subscription` object per customer. Subscribing schedules a `renew` named alarm one
period ahead (30 days, or `?period=SECONDS` for a trial). When it fires, the handler
registers a durable `charge_invoice` operation (retried on its own if the payments
service fails) whose id is the alarm occurrence's idempotency key, then schedules the
next occurrence. Scheduling a name again replaces its pending occurrence, so
subscribing twice is harmless; cancelling stops the next renewal from charging or
rescheduling.

The payments service is the `PAYMENTS` binding: here `Payments`, a Durable Object that
accepts one charge per idempotency key, as a real provider does. Tests bind a fake with
injectable failures in its place. The same file runs on Cloudflare and under
`durability serve examples/subscription_renewals`.
"""

import json
from urllib.parse import parse_qs, urlsplit

from workers import DurableObject, Response, WorkerEntrypoint

from durability import (
    Durability,
    DurabilityAlarms,
    DurabilityScheduler,
    RetryPolicy,
    now_ms,
)

RENEWAL_PERIOD_MS = 30 * 24 * 60 * 60 * 1000
"""Thirty days between charges."""

HISTORY_RETENTION_MS = 90 * 24 * 60 * 60 * 1000
"""Settled records older than this are removed by `purge_history`."""

PROVIDER = "provider"
"""The one `Payments` object every subscription charges through."""


class Subscription(DurableObject):
    """One customer's subscription: a recurring `renew` alarm and durable charges."""

    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        # Both helpers share one scheduler: it owns the object's single alarm and one
        # concurrency pool for every handler. `context=ctx` is the same on both hosts.
        self.scheduler = DurabilityScheduler(context=ctx, alarm_concurrency=5)
        self.durability = Durability(
            scheduler=self.scheduler,
            handlers={"charge_invoice": self._charge_invoice},
            retries=RetryPolicy(max_attempts=8),
        )
        self.alarms = DurabilityAlarms(scheduler=self.scheduler, handlers={"renew": self._renew})

    async def _charge_invoice(self, call):
        payload = call.payload
        await self.env.PAYMENTS.getByName(PROVIDER).charge(
            call.id, payload["customer_id"], payload["period_start"]
        )

    async def _renew(self, info):
        customer_id = await self.ctx.storage.get("customer_id")
        if customer_id is None:
            return  # Cancelled: this occurrence completes without charging or renewing.
        # The occurrence's idempotency key is stable across its retries, so a retried
        # renewal registers the same charge again, which is a no-op.
        await self.durability.charge_invoice(
            id=info.idempotency_key,
            payload={"customer_id": customer_id, "period_start": info.scheduled_time},
        )
        period_ms = await self.ctx.storage.get("period_ms") or RENEWAL_PERIOD_MS
        await self._schedule_renewal(info.scheduled_time + period_ms)

    async def _schedule_renewal(self, at_ms):
        """Schedule (or move) the next renewal and remember when it is."""
        await self.alarms.renew(at_ms)
        await self.ctx.storage.put("next_renewal_at", at_ms)

    async def subscribe(self, customer_id, period_ms=RENEWAL_PERIOD_MS):
        """Start (or restart) the subscription; returns when the first renewal is due."""
        await self.ctx.storage.put("customer_id", customer_id)
        await self.ctx.storage.put("period_ms", period_ms)
        first = now_ms() + period_ms
        await self._schedule_renewal(first)
        return first

    async def cancel(self):
        """Stop renewing: the next occurrence finds no customer and does nothing."""
        await self.ctx.storage.delete("customer_id")
        await self.ctx.storage.delete("period_ms")
        await self.ctx.storage.delete("next_renewal_at")

    async def state(self):
        """The customer and the next renewal time (None when not subscribed)."""
        return {
            "customer_id": await self.ctx.storage.get("customer_id"),
            "next_renewal_at": await self.ctx.storage.get("next_renewal_at"),
        }

    async def purge_history(self):
        """Destructive retention: remove settled records older than 90 days."""
        cutoff = now_ms() - HISTORY_RETENTION_MS
        return {
            "operations": await self.durability.purge_before(cutoff),
            "alarms": await self.alarms.purge_before(cutoff),
        }

    async def alarm(self, alarm_info=None):
        await self.scheduler.alarm(alarm_info)


class Payments(DurableObject):
    """A stand-in payments provider: one charge per idempotency key, kept in SQL."""

    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        ctx.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS charges (idempotency_key TEXT PRIMARY KEY,"
            " customer_id TEXT NOT NULL, period_start INTEGER NOT NULL)"
        )

    async def charge(self, idempotency_key, customer_id, period_start):
        """Charge once per key; a repeated key changes nothing. Returns the key."""
        self.ctx.storage.sql.exec(
            "INSERT INTO charges (idempotency_key, customer_id, period_start) VALUES (?, ?, ?)"
            " ON CONFLICT (idempotency_key) DO NOTHING",
            idempotency_key,
            customer_id,
            period_start,
        )
        return idempotency_key

    async def charges(self, customer_id):
        """The period starts charged to `customer_id`, oldest first."""
        cursor = self.ctx.storage.sql.exec(
            "SELECT period_start FROM charges WHERE customer_id = ? ORDER BY period_start",
            customer_id,
        )
        return [row.period_start for row in cursor]


def json_response(value, status=200):
    return Response(json.dumps(value), status=status, headers={"content-type": "application/json"})


class Default(WorkerEntrypoint):
    """`POST /{customer}/subscribe[?period=SECONDS]`, `POST /{customer}/cancel`,
    `GET /{customer}`, `GET /{customer}/charges`."""

    async def fetch(self, request):
        url = urlsplit(request.url)
        parts = [part for part in url.path.split("/") if part]
        if not parts:
            return Response(
                "Expected POST /{customer}/(subscribe|cancel) or GET /{customer}[/charges]",
                status=404,
            )
        customer = parts[0]
        subscription = self.env.SUBSCRIPTIONS.getByName(customer)
        match request.method, parts[1:]:
            case "GET", []:
                return json_response(await subscription.state())
            case "GET", ["charges"]:
                provider = self.env.PAYMENTS.getByName(PROVIDER)
                return json_response(await provider.charges(customer))
            case "POST", ["subscribe"]:
                period = parse_qs(url.query).get("period", [""])[-1]
                if period and not (period.isascii() and period.isdigit() and int(period) > 0):
                    return Response("period must be a positive number of seconds", status=400)
                period_ms = int(period) * 1000 if period else RENEWAL_PERIOD_MS
                first = await subscription.subscribe(customer, period_ms)
                return json_response({"subscribed": customer, "next_renewal_at": first}, 201)
            case "POST", ["cancel"]:
                await subscription.cancel()
                return Response("cancelled")
        return Response("Not found", status=404)
