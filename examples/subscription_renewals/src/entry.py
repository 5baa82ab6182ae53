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

MAX_PERIOD_S = 10 * 366 * 24 * 60 * 60
"""The longest renewal period accepted: ten years, in seconds."""


def check_subscription(customer_id, period_ms):
    """ValueError naming the argument unless `customer_id` is a non-empty string and
    `period_ms` a whole number of milliseconds from 1 s to ten years."""
    if not isinstance(customer_id, str) or not customer_id:
        raise ValueError(f"customer_id must be a non-empty string, got {customer_id!r}")
    if (
        isinstance(period_ms, bool)
        or not isinstance(period_ms, int)
        or not 1000 <= period_ms <= MAX_PERIOD_S * 1000
    ):
        rule = f"a whole number from 1000 to {MAX_PERIOD_S * 1000}"
        raise ValueError(f"period_ms must be {rule}, got {period_ms!r}")


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
        """Start (or restart) the subscription; returns when the first renewal is due.
        Bad arguments raise ValueError before anything is written."""
        check_subscription(customer_id, period_ms)
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


def _period_ms(query):
    """The `period` parameter in ms (30 days when absent); ValueError says what is wrong."""
    values = parse_qs(query, keep_blank_values=True).get("period")
    if values is None:
        return RENEWAL_PERIOD_MS
    text = values[-1]
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_PERIOD_S:
        raise ValueError(f"period must be a whole number of seconds from 1 to {MAX_PERIOD_S}")
    return int(text) * 1000


def _allowed(route):
    """The methods a route answers to; empty for a path that is no route."""
    match route:
        case [] | ["charges"]:
            return ("GET",)
        case ["subscribe"] | ["cancel"]:
            return ("POST",)
    return ()


USAGE = "Expected POST /{customer}/(subscribe|cancel) or GET /{customer}[/charges]\n"


class Default(WorkerEntrypoint):
    """`POST /{customer}/subscribe[?period=SECONDS]`, `POST /{customer}/cancel`,
    `GET /{customer}`, `GET /{customer}/charges`."""

    async def fetch(self, request):
        url = urlsplit(request.url)
        parts = [part for part in url.path.split("/") if part]
        if not parts:
            return Response(USAGE, status=404)
        customer = parts[0]
        subscription = self.env.SUBSCRIPTIONS.getByName(customer)
        match request.method, parts[1:]:
            case "GET", []:
                return json_response(await subscription.state())
            case "GET", ["charges"]:
                provider = self.env.PAYMENTS.getByName(PROVIDER)
                return json_response(await provider.charges(customer))
            case "POST", ["subscribe"]:
                try:
                    period_ms = _period_ms(url.query)
                except ValueError as error:
                    return Response(f"{error}\n", status=400)
                first = await subscription.subscribe(customer, period_ms)
                return json_response({"subscribed": customer, "next_renewal_at": first}, 201)
            case "POST", ["cancel"]:
                await subscription.cancel()
                return Response("cancelled")
        allowed = _allowed(parts[1:])
        if allowed:
            return Response(
                f"{request.method} is not allowed here: use {' or '.join(allowed)}\n",
                status=405,
                headers={"allow": ", ".join(allowed)},
            )
        return Response(USAGE, status=404)
