"""A counter per name, with an alarm that resets it: the first `durability` demo.

Run it with::

    durability serve examples/counter.py

then, in another shell::

    curl -X POST localhost:8787/apples/increment     # {"name":"apples","value":1,...}
    curl -X POST localhost:8787/apples/reset-in/30   # arm the alarm: reset in 30 s
    curl localhost:8787/apples                       # value and the pending reset
    curl -X POST localhost:8787/apples/cancel-reset  # disarm it again

Each name is its own durable object with its own SQLite file under `.durability/`.
Stop the server (Ctrl-C) and start it again: the counts and the armed alarms are still
there, and an alarm that came due while the server was down fires at start.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from durability import now_ms
from durability.runtime import AlarmInvocationInfo, DurableObject, Request, Response


class Counter(DurableObject):
    """One named counter: its value lives in SQL, its reset in the object's alarm."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)"
        )

    async def increment(self, by: int = 1) -> dict[str, Any]:
        """Add `by` and return the new state."""
        self.ctx.storage.sql.exec(
            "INSERT INTO counter (id, value) VALUES (0, ?) "
            "ON CONFLICT (id) DO UPDATE SET value = value + excluded.value",
            by,
        )
        return await self.state()

    async def state(self) -> dict[str, Any]:
        """The current value and when the pending reset fires (ms, or None)."""
        rows = self.ctx.storage.sql.exec("SELECT value FROM counter WHERE id = 0").to_list()
        return {
            "name": self.ctx.id.name,
            "value": rows[0]["value"] if rows else 0,
            "reset_at_ms": await self.ctx.storage.get_alarm(),
        }

    async def reset_in(self, seconds: int) -> dict[str, Any]:
        """Arm the alarm so the counter goes back to zero in `seconds`."""
        await self.ctx.storage.set_alarm(now_ms() + seconds * 1000)
        return await self.state()

    async def cancel_reset(self) -> dict[str, Any]:
        """Disarm the pending reset, if any."""
        await self.ctx.storage.delete_alarm()
        return await self.state()

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        """The reset: runs once when the alarm comes due, even after a restart."""
        self.ctx.storage.sql.exec("DELETE FROM counter")


bindings = {"COUNTERS": Counter}

USAGE = """durability counter demo
  POST /NAME/increment          add one
  GET  /NAME                    value and pending reset
  POST /NAME/reset-in/SECONDS   reset to zero in SECONDS (the object's alarm)
  POST /NAME/cancel-reset       disarm the reset
"""

MAX_RESET_SECONDS = 366 * 24 * 3600
BAD_SECONDS = f"SECONDS must be a whole number from 0 to {MAX_RESET_SECONDS}\n"


async def fetch(request: Request, env: Any) -> Response:
    """Route `/NAME[/action[/arg]]` to the counter object called NAME."""
    parts = [part for part in urlsplit(request.url).path.split("/") if part]
    if not parts:
        return Response(USAGE)
    counter = env.COUNTERS.get_by_name(parts[0])
    match request.method, parts[1:]:
        case "GET", []:
            return Response.json(await counter.state())
        case "POST", ["increment"]:
            return Response.json(await counter.increment())
        case "POST", ["reset-in", seconds]:
            if not (seconds.isascii() and seconds.isdigit()) or int(seconds) > MAX_RESET_SECONDS:
                return Response(BAD_SECONDS, status=400)
            return Response.json(await counter.reset_in(int(seconds)))
        case "POST", ["cancel-reset"]:
            return Response.json(await counter.cancel_reset())
    return Response(USAGE, status=404)
