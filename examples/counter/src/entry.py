"""A counter per name, with an alarm that resets it: the first `durability` demo.

The same file runs on Cloudflare (`pywrangler deploy`) and locally
(`durability serve examples/counter`): it uses only Cloudflare's Python API, which
the embedded runtime answers to as well.
"""

import json
from urllib.parse import urlsplit

from workers import DurableObject, Response, WorkerEntrypoint

from durability import now_ms


class Counter(DurableObject):
    """One named counter: its value lives in SQL, its reset in the object's alarm."""

    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        ctx.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)"
        )

    async def increment(self, by=1):
        """Add `by` and return the new state."""
        self.ctx.storage.sql.exec(
            "INSERT INTO counter (id, value) VALUES (0, ?) "
            "ON CONFLICT (id) DO UPDATE SET value = value + excluded.value",
            by,
        )
        return await self.state()

    async def state(self):
        """The current value and when the pending reset fires (ms, or None)."""
        # Read columns as attributes: the one row spelling both Cloudflare SDKs accept.
        row = self.ctx.storage.sql.exec(
            "SELECT coalesce(max(value), 0) AS value FROM counter"
        ).one()
        return {
            "name": self.ctx.id.name,
            "value": row.value,
            "reset_at_ms": _ms_or_none(await self.ctx.storage.getAlarm()),
        }

    async def reset_in(self, seconds):
        """Arm the alarm so the counter goes back to zero in `seconds`."""
        await self.ctx.storage.setAlarm(now_ms() + seconds * 1000)
        return await self.state()

    async def cancel_reset(self):
        """Disarm the pending reset, if any."""
        await self.ctx.storage.deleteAlarm()
        return await self.state()

    async def alarm(self, alarm_info=None):
        """The reset: runs once when the alarm comes due, even after a restart."""
        self.ctx.storage.sql.exec("DELETE FROM counter")


def _ms_or_none(value):
    # Cloudflare's built-in SDK answers an unset alarm with `jsnull`, not None.
    return int(value) if isinstance(value, int | float) else None


USAGE = """durability counter demo
  POST /NAME/increment          add one
  GET  /NAME                    value and pending reset
  POST /NAME/reset-in/SECONDS   reset to zero in SECONDS (the object's alarm)
  POST /NAME/cancel-reset       disarm the reset
"""

MAX_RESET_S = 366 * 24 * 3600
BAD_SECONDS = f"SECONDS must be a whole number from 0 to {MAX_RESET_S}\n"


def json_response(value, status=200):
    return Response(json.dumps(value), status=status, headers={"content-type": "application/json"})


def _allowed(route):
    """The methods a route answers to; empty for a path that is no route."""
    match route:
        case []:
            return ("GET",)
        case ["increment"] | ["reset-in", _] | ["cancel-reset"]:
            return ("POST",)
    return ()


def not_allowed(method, allowed):
    """405 for a route asked with the wrong method, naming the methods it takes."""
    text = f"{method} is not allowed here: use {' or '.join(allowed)}\n"
    return Response(text, status=405, headers={"allow": ", ".join(allowed)})


class Default(WorkerEntrypoint):
    """Routes `/NAME[/action[/arg]]` to the counter object called NAME."""

    async def fetch(self, request):
        parts = [part for part in urlsplit(request.url).path.split("/") if part]
        if not parts:
            return Response(USAGE)
        counter = self.env.COUNTERS.getByName(parts[0])
        match request.method, parts[1:]:
            case "GET", []:
                return json_response(await counter.state())
            case "POST", ["increment"]:
                return json_response(await counter.increment())
            case "POST", ["reset-in", seconds]:
                if not (seconds.isascii() and seconds.isdigit()) or int(seconds) > MAX_RESET_S:
                    return Response(BAD_SECONDS, status=400)
                return json_response(await counter.reset_in(int(seconds)))
            case "POST", ["cancel-reset"]:
                return json_response(await counter.cancel_reset())
        allowed = _allowed(parts[1:])
        return not_allowed(request.method, allowed) if allowed else Response(USAGE, status=404)
