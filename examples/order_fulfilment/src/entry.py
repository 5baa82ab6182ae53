"""Order fulfilment as a Cloudflare Workflow: charge, reserve, ship (or refund), follow up.

Each order is one instance of `OrderFulfilment`, created with the order as its params and
the order id as its instance id (so an order cannot be started twice). Its steps:

1. `charge_payment`: charge the order's amount once (the shop dedupes on the order id),
   retried 3 times, 2 s apart doubling, 30 s per attempt;
2. `reserve_stock` (it takes `charge_payment`'s result: a parameter names the step it
   depends on): reserve the items; out of stock is final (`NonRetryableError`), so the
   payment is refunded in the `refund` step and the workflow errors;
3. wait for the carrier's `shipped` webhook (`POST /orders/{id}/shipped`) for up to three
   days (`ship_within` seconds in the order, for a demo); without it, the stock is
   released and the payment refunded;
4. sleep three days (`follow_up_after` seconds), then the `follow_up` email.

Every step is recorded by the workflow, so a restart resumes at the first unfinished
step. The `Shop` object stands in for the payment, warehouse and mail services; each
call names the order, so a step retried after its effect changes nothing twice.
Only the `workers` SDK is used: the file runs on Cloudflare Workflows as it is.
"""

import json
from urllib.parse import urlsplit

from workers import DurableObject, Response, WorkerEntrypoint, WorkflowEntrypoint
from workers.workflows import NonRetryableError

DAY_S = 24 * 60 * 60
SHOP = "shop"


class OrderFulfilment(WorkflowEntrypoint):
    """One order, from payment to the follow-up email."""

    async def run(self, event, step):
        order = event.payload
        order_id = event.instanceId
        shop = self.env.SHOP.getByName(SHOP)
        payment = {
            "retries": {"limit": 3, "delay": "2 seconds", "backoff": "exponential"},
            "timeout": "30 seconds",
        }

        @step.do(config=payment)
        async def charge_payment():
            return await shop.charge(order_id, order["amount"])

        @step.do()
        async def reserve_stock(charge_payment):
            if not await shop.reserve(order_id, order["items"]):
                raise NonRetryableError("out of stock")
            return charge_payment

        @step.do()
        async def refund():
            return await shop.refund(order_id)

        try:
            await reserve_stock()
        except Exception:
            await refund()
            raise

        try:
            shipped = await step.wait_for_event(
                "shipping webhook", "shipped", timeout=order.get("ship_within", 3 * DAY_S) * 1000
            )
        except Exception:

            @step.do()
            async def release_stock():
                return await shop.release(order_id)

            await release_stock()
            await refund()
            return {"order": order_id, "outcome": "cancelled: not shipped in time"}

        await step.sleep("wait before follow-up", order.get("follow_up_after", 3 * DAY_S) * 1000)

        @step.do()
        async def follow_up():
            tracking = shipped["payload"]["tracking"]
            return await shop.email(order_id, f"How was your order? (tracking {tracking})")

        await follow_up()
        return {
            "order": order_id,
            "outcome": "delivered",
            "tracking": shipped["payload"]["tracking"],
        }


class Shop(DurableObject):
    """Stand-in payment, warehouse and mail services: one effect per order and kind."""

    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        ctx.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS effects (order_id TEXT NOT NULL, kind TEXT NOT NULL,"
            " detail TEXT NOT NULL, PRIMARY KEY (order_id, kind))"
        )
        ctx.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS stock (item TEXT PRIMARY KEY, count INTEGER NOT NULL)"
        )

    def _record(self, order_id, kind, detail):
        self.ctx.storage.sql.exec(
            "INSERT INTO effects (order_id, kind, detail) VALUES (?, ?, ?)"
            " ON CONFLICT (order_id, kind) DO NOTHING",
            order_id,
            kind,
            json.dumps(detail),
        )
        return kind

    async def charge(self, order_id, amount):
        return self._record(order_id, "charged", amount)

    async def refund(self, order_id):
        return self._record(order_id, "refunded", True)

    async def reserve(self, order_id, items):
        """Reserve `items` (names); stock starts at 3 of each. False when any is short."""
        sql = self.ctx.storage.sql
        if [
            row
            for row in sql.exec(
                "SELECT 1 FROM effects WHERE order_id = ? AND kind = 'reserved'", order_id
            )
        ]:
            return True
        for item in items:
            sql.exec("INSERT INTO stock (item, count) VALUES (?, 3) ON CONFLICT DO NOTHING", item)
            left = [row for row in sql.exec("SELECT count FROM stock WHERE item = ?", item)]
            if left[0].count < items.count(item):
                return False
        for item in items:
            sql.exec("UPDATE stock SET count = count - 1 WHERE item = ?", item)
        self._record(order_id, "reserved", items)
        return True

    async def release(self, order_id):
        sql = self.ctx.storage.sql
        rows = [
            row
            for row in sql.exec(
                "SELECT detail FROM effects WHERE order_id = ? AND kind = 'reserved'", order_id
            )
        ]
        if rows and self._record(order_id, "released", True):
            for item in json.loads(rows[0].detail):
                sql.exec("UPDATE stock SET count = count + 1 WHERE item = ?", item)
        return "released"

    async def email(self, order_id, text):
        return self._record(order_id, "emailed", text)

    async def activity(self, order_id):
        """The effects of one order, in the order they happened."""
        cursor = self.ctx.storage.sql.exec(
            "SELECT kind, detail FROM effects WHERE order_id = ? ORDER BY rowid", order_id
        )
        return [[row.kind, json.loads(row.detail)] for row in cursor]


def json_response(value, status=200):
    return Response(json.dumps(value), status=status, headers={"content-type": "application/json"})


class Default(WorkerEntrypoint):
    """`POST /orders/{id}` (the order: items, amount, optional ship_within and
    follow_up_after in seconds), `POST /orders/{id}/shipped` (the carrier's webhook:
    tracking), `GET /orders/{id}` (the workflow's status), `GET /orders/{id}/activity`."""

    async def fetch(self, request):
        parts = [part for part in urlsplit(request.url).path.split("/") if part]
        if len(parts) < 2 or parts[0] != "orders":
            return Response("Expected /orders/{id}[/shipped|/activity]", status=404)
        order_id = parts[1]
        match request.method, parts[2:]:
            case "POST", []:
                order = await request.json()
                try:
                    await self.env.ORDERS.create(id=order_id, params=order)
                except Exception as error:
                    return Response(str(error), status=409)
                return json_response({"id": order_id}, 202)
            case "POST", ["shipped"]:
                instance = await self._order(order_id)
                if instance is None:
                    return Response("no such order", status=404)
                await instance.send_event(type="shipped", payload=await request.json())
                return json_response({"id": order_id}, 202)
            case "GET", []:
                instance = await self._order(order_id)
                if instance is None:
                    return Response("no such order", status=404)
                return json_response(await instance.status())
            case "GET", ["activity"]:
                return json_response(await self.env.SHOP.getByName(SHOP).activity(order_id))
        return Response("Not found", status=404)

    async def _order(self, order_id):
        """The order's workflow instance, or None when there is no such order."""
        try:
            return await self.env.ORDERS.get(order_id)
        except Exception:
            return None
