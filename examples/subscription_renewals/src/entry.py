"""Subscription renewals: a recurring renewal alarm and one durable charge per period.

One `Subscription` object per customer, its handlers declared on the class: `renew`
is a named alarm and `charge_invoice` a durable operation (retried on its own if the
payments service fails). Subscribing makes `renew` recur every period (30 days, or
`?period=SECONDS` for a trial) from one period ahead, with `every`: each slot is
computed from the previous one, so renewals never drift, whatever the retries. Each
occurrence registers the charge of the billing period starting at its slot, under the
id `period:<start ms>`. The charge's idempotency key, which the payments service
dedupes on, is built from that id: a retried renewal, or a renewal of the same period
run again, registers the same charge, which is a no-op, so each period is charged once.
Subscribing again replaces the recurrence, so subscribing twice is harmless;
cancelling removes it.

The payments service is the `PAYMENTS` binding: here `Payments`, a Durable Object that
accepts one charge per idempotency key, as a real provider does. Tests bind a fake with
injectable failures in its place. The same file runs on Cloudflare and under
`durability serve examples/subscription_renewals`.
"""

import json
from typing import ClassVar
from urllib.parse import parse_qs, urlsplit

from workers import DurableObject, Response, WorkerEntrypoint

from durability import Durable, RetryPolicy, named_alarm, now_ms, operation

RENEWAL_PERIOD_MS = 30 * 24 * 60 * 60 * 1000
"""Thirty days between charges."""

HISTORY_RETENTION_MS = 90 * 24 * 60 * 60 * 1000
"""Settled records older than this are removed by `purge_history`."""

PROVIDER = "provider"
"""The one `Payments` object every subscription charges through."""


class Subscription(Durable, DurableObject):
    """One customer's subscription: a `renew` alarm per period and one charge per period."""

    scheduler_options: ClassVar = {"alarm_concurrency": 5}

    @operation(retries=RetryPolicy(max_attempts=8))
    async def charge_invoice(self, call):
        """Charge one billing period; the provider applies each idempotency key once."""
        payload = call.payload
        await self.env.PAYMENTS.getByName(PROVIDER).charge(
            call.idempotency_key, payload["customer_id"], payload["period_start"]
        )

    @named_alarm
    async def renew(self, info):
        """Start the billing period beginning at this slot (`info.scheduled_time`): charge
        it. The recurrence itself schedules the next period."""
        customer_id = await self.ctx.storage.get("customer_id")
        info.signal.raise_if_aborted()  # cancelled meanwhile: charge nothing
        period_start = info.scheduled_time
        await self.charge_invoice(
            f"period:{period_start}", {"customer_id": customer_id, "period_start": period_start}
        )

    async def subscribe(self, customer_id, period_ms=RENEWAL_PERIOD_MS):
        """Start (or restart) the subscription; returns when the first renewal is due."""
        await self.ctx.storage.put("customer_id", customer_id)
        first = now_ms() + period_ms
        await self.renew.every(period_ms, start_at=first)
        return first

    async def cancel(self):
        """Stop renewing: the recurrence is removed (a renewal running now is aborted)."""
        await self.renew.cancel()
        await self.ctx.storage.delete("customer_id")

    async def state(self):
        """The customer and the next renewal time (None when not subscribed)."""
        renewal = await self.renew.get()
        return {
            "customer_id": await self.ctx.storage.get("customer_id"),
            "next_renewal_at": None if renewal is None else renewal.scheduled_time,
        }

    async def purge_history(self):
        """Destructive retention: remove settled records older than 90 days."""
        cutoff = now_ms() - HISTORY_RETENTION_MS
        return {
            "operations": await self.durability.purge_before(cutoff),
            "alarms": await self.alarms.purge_before(cutoff),
        }


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
