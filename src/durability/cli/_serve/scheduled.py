"""Cron triggers (wrangler's `triggers.crons`): the `scheduled` handler on schedule, and
fired by hand.

Each cron runs the entry point's `scheduled(self, controller, env, ctx)` (or a shorter
form, as `scheduled(self)`) at every match, in UTC, on the runtime's clock: under
`--virtual-time` the schedule follows virtual time. Expressions are Cloudflare's: five
fields, `L`, `W` and `#`, names, and days of the week 1-7 counted from Sunday (as in
Quartz). `GET /cdn-cgi/handler/scheduled?cron=...&time=...` fires the handler once, and
so does `GET /__scheduled?cron=...` under `durability serve --test-scheduled`, as with
`wrangler dev --test-scheduled`. Parsing needs the `cron` extra (`cronsim`).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..._alarms.recurrence import RecurrenceSlot, cron, next_slot
from ..._clock import now_ms
from ...runtime._http import Request, Response
from ...runtime._relaxed import call_relaxed

__all__ = ["CronDriver", "ScheduledController", "check_crons", "run_scheduled"]

logger = logging.getLogger("durability.serve")

MANUAL_PATHS = ("/cdn-cgi/handler/scheduled",)
"""Paths that fire the handler by hand, always."""

TEST_PATH = "/__scheduled"
"""The path that fires it under `--test-scheduled`."""

_DAY_ITEM = re.compile(r"(\d+)(?:-(\d+))?((?:L|#\d+)?)(/\d+)?")


class ScheduledController:
    """What `scheduled` receives: `scheduledTime` (ms), `cron`, and `noRetry()`."""

    def __init__(self, scheduled_time: int, cron_text: str) -> None:
        self.scheduledTime = scheduled_time
        self.cron = cron_text
        self.type = "scheduled"
        self.retry = True

    def noRetry(self) -> None:
        """Ask not to retry a failed run (nothing is retried locally)."""
        self.retry = False

    def __repr__(self) -> str:
        return f"ScheduledController(cron={self.cron!r}, scheduledTime={self.scheduledTime})"


def standard_cron(expression: str) -> str:
    """`expression` with Cloudflare's days of the week (1 = Sunday) counted from 0."""
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(
            f'"{expression}" must have five fields (minute hour day-of-month month day-of-week)'
        )
    items = []
    for item in fields[4].split(","):
        match = _DAY_ITEM.fullmatch(item)
        if match is None:
            items.append(item)
            continue
        first, last, suffix, step = match.groups()
        numbers = [int(first)] + ([int(last)] if last else [])
        if not all(1 <= n <= 7 for n in numbers):
            raise ValueError(f'"{expression}": days of the week are 1-7 (1 = Sunday)')
        days = "-".join(str(n - 1) for n in numbers)
        items.append(f"{days}{suffix}{step or ''}")
    return " ".join([*fields[:4], ",".join(items)])


def check_crons(values: object, where: str) -> list[str]:
    """The cron expressions of `triggers.crons`, each checked (needs `cronsim`)."""
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ValueError(f"{where}: `triggers.crons` must be a list of cron expressions")
    for value in values:
        try:
            cron(standard_cron(value), "UTC", "latest")
        except ValueError as error:
            raise ValueError(f"{where}: triggers.crons: {error}") from None
    return list(values)


async def run_scheduled(
    entrypoint: type, ctx: Any, env: Any, controller: ScheduledController
) -> None:
    """Run `Default(ctx, env).scheduled(controller, env, ctx)` once (the arguments it
    has no parameter for dropped, as workerd does)."""
    handler = getattr(entrypoint(ctx, env), "scheduled", None)
    if not callable(handler):
        raise LookupError("Handler does not export a scheduled() function")
    result = call_relaxed(handler, controller, env, ctx)
    if inspect.isawaitable(result):
        await result


async def fire_by_hand(
    request: Request, run: Callable[[ScheduledController], Awaitable[None]]
) -> Response:
    """Answer `GET ...scheduled?cron=...&time=...` by running the handler once."""
    query = parse_qs(urlsplit(request.url).query)
    time_text = query.get("time", [""])[0]
    scheduled_time = int(time_text) if time_text.isdigit() else now_ms()
    try:
        await run(ScheduledController(scheduled_time, query.get("cron", [""])[0]))
    except Exception as error:
        logger.exception("scheduled() raised")
        return Response(f"Internal Server Error: {type(error).__name__}: {error}\n", 500)
    return Response("Ran scheduled event")


class CronDriver:
    """Fires `run(controller)` at each match of each cron until stopped."""

    def __init__(
        self, crons: list[str], run: Callable[[ScheduledController], Awaitable[None]]
    ) -> None:
        self._crons = crons
        self._run = run
        self._tasks: set[asyncio.Future[None]] = set()

    def start(self) -> None:
        """Start one timer per cron on the running loop (and its clock)."""
        for expression in self._crons:
            self._spawn(self._follow(expression))

    async def stop(self) -> None:
        """Stop the timers and the runs still going."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _follow(self, expression: str) -> None:
        recurrence = cron(standard_cron(expression), "UTC", "latest")
        while True:
            at = next_slot(recurrence, RecurrenceSlot(now_ms(), 0)).at
            await asyncio.sleep(max(at - now_ms(), 0) / 1000)
            while now_ms() < at:
                await asyncio.sleep((at - now_ms()) / 1000)
            self._spawn(self._fire(ScheduledController(at, expression)))

    async def _fire(self, controller: ScheduledController) -> None:
        try:
            await self._run(controller)
        except Exception:
            logger.exception("scheduled() raised for cron %r", controller.cron)
