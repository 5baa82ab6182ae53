"""A worker for the dashboard tests: shops whose charges fail and whose shipping waits.

`POST /<shop>/order/<invoice>` registers a `charge` (two attempts, both fail with a
message that holds markup), a `ship` (fails, retried hourly), a `renew` named alarm a
month ahead, and one log record that the `mailer` consumer has not read yet.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

import durability
from durability import (
    Durability,
    DurabilityAlarms,
    DurabilityLog,
    DurabilityScheduler,
    DurableAlarmInfo,
    DurableCall,
    LogAppendInput,
    MethodOptions,
    RetryPolicy,
)
from durability.runtime import AlarmInvocationInfo, DurableObject, Request, Response

HOUR_MS = 3_600_000
MONTH_MS = 30 * 24 * HOUR_MS


class Shop(DurableObject):
    """One shop: durable operations, a named alarm and a log."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.scheduler = DurabilityScheduler(context=ctx)
        self.durability = Durability(
            scheduler=self.scheduler,
            handlers={"charge": self.charge, "ship": self.ship},
            retries=RetryPolicy(max_attempts=2),
            methods={
                "ship": MethodOptions(
                    retries=RetryPolicy(max_attempts=10, delay=lambda attempt: HOUR_MS)
                )
            },
        )
        self.alarms = DurabilityAlarms(scheduler=self.scheduler, handlers={"renew": self.renew})
        self.log: DurabilityLog[Any] = DurabilityLog(scheduler=self.scheduler)

    async def charge(self, call: DurableCall) -> None:
        raise RuntimeError(f"card <b>declined</b> for {call.id}")

    async def ship(self, call: DurableCall) -> None:
        raise ConnectionError("courier offline")

    async def renew(self, info: DurableAlarmInfo) -> None:
        """Nothing to do: the dashboard only shows the schedule."""

    async def order(self, invoice: str) -> None:
        await self.durability.charge(id=invoice, payload={"amount": 5})
        await self.durability.ship(id=f"ship-{invoice}", payload={})
        await self.alarms.renew(durability.now_ms() + MONTH_MS)
        await self.log.append([LogAppendInput({"invoice": invoice})])
        await self.log.commit("mailer", 0)

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.scheduler.alarm(info)


bindings = {"SHOPS": Shop}


async def fetch(request: Request, env: Any) -> Response:
    parts = [unquote(part) for part in urlsplit(request.url).path.strip("/").split("/")]
    if request.method == "POST" and len(parts) == 3 and parts[1] == "order":
        await env.SHOPS.get_by_name(parts[0]).order(parts[2])
        return Response.json({"ordered": parts[2]}, status=201)
    return Response("not found\n", status=404)
