"""Exercises a Durable Object's ctx: start-up, abort, id, waitUntil and the alarm."""

import asyncio
import datetime
import json
from urllib.parse import urlsplit

import js
from workers import DurableObject, Response, WorkerEntrypoint


async def attempt(label, make):
    """`label: result` of awaiting `make()` (or of calling it), or `label: raised ...`."""
    try:
        result = make()
        if hasattr(result, "__await__"):
            result = await result
    except Exception as error:
        return f"{label}: raised {type(error).__name__}: {error}"
    return f"{label}: {result!r}"


def _refusal(make):
    """What `make()` raised (its type and last line), or what it gave."""
    try:
        return make()
    except Exception as error:
        return f"{type(error).__name__}: {(str(error).strip().splitlines() or [''])[-1]}"


async def failed_start(stub):
    """Whether a call failed because the constructor's start-up failed (Cloudflare wraps
    the error in a JsException whose text holds the traceback)."""
    try:
        await stub.ping()
    except Exception as error:
        return "start-up failed" in str(error)
    return "answered"


class Started(DurableObject):
    """Reads its state in the constructor, inside blockConcurrencyWhile, not awaited."""

    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        self.steps = ["constructed"]
        ctx.blockConcurrencyWhile(self.load)

    async def load(self):
        await asyncio.sleep(0.05)
        sql = self.ctx.storage.sql
        sql.exec("CREATE TABLE IF NOT EXISTS visits (at INTEGER)")
        self.visits = sql.exec("SELECT count(*) AS n FROM visits").one().n
        self.steps.append("loaded")

    async def visit(self):
        self.steps.append("visited")
        self.ctx.storage.sql.exec("INSERT INTO visits VALUES (1)")
        return {"steps": self.steps, "visits_before": self.visits}

    async def blocked(self):
        order = []

        async def first():
            await asyncio.sleep(0.02)
            order.append("inside")
            return "value"

        result = await self.ctx.blockConcurrencyWhile(first)
        order.append(result)
        plain = await self.ctx.blockConcurrencyWhile(lambda: "plain")
        refused = await attempt("not callable", lambda: self.ctx.blockConcurrencyWhile(5))
        return [*order, plain, refused]


class Broken(DurableObject):
    """Its constructor's blockConcurrencyWhile fails: every call fails, each time anew."""

    def __init__(self, ctx, env):
        super().__init__(ctx, env)

        async def fail():
            raise ValueError("start-up failed")

        ctx.blockConcurrencyWhile(fail)

    async def ping(self):
        return "pong"


class Resettable(DurableObject):
    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        self.memory = []
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS log (entry TEXT)")

    async def remember(self, entry):
        self.memory.append(entry)
        self.ctx.storage.sql.exec("INSERT INTO log VALUES (?)", entry)
        return await self.state()

    async def abort_after_write(self, reason):
        self.ctx.storage.sql.exec("INSERT INTO log VALUES ('written then aborted')")
        try:
            if reason == "none":
                self.ctx.abort()
            else:
                self.ctx.abort(reason)
        except Exception as error:
            return f"caught {type(error).__name__}"
        return "not reached"

    async def state(self):
        logged = [row.entry for row in self.ctx.storage.sql.exec("SELECT entry FROM log")]
        return {"memory": self.memory, "log": logged}

    async def identity(self):
        id = self.ctx.id
        return {
            "name": id.name,
            "hex length": len(str(id)),
            "toString matches str": id.toString() == str(id),
            "equals itself": id.equals(self.ctx.id),
            "equals its text": _refusal(lambda: id.equals(str(id))),
            "waitUntil of a task": self.ctx.waitUntil(asyncio.ensure_future(asyncio.sleep(0))),
            "waitUntil of a number": self.ctx.waitUntil(5),
        }


class Alarmed(DurableObject):
    async def arguments(self):
        s = self.ctx.storage
        await s.deleteAlarm()
        lines = [await attempt("unset", s.getAlarm)]
        cases = [
            ("int", 4_102_444_800_000),
            ("float", 4_102_444_800_000.9),
            ("naive datetime", datetime.datetime(2100, 1, 1, 12, 30)),
            (
                "aware datetime",
                datetime.datetime(
                    2100, 1, 1, 12, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=2))
                ),
            ),
            ("latest", 9_223_372_036_854),
            ("after the latest", 9_223_372_036_855),
            ("date", datetime.date(2100, 1, 1)),
            ("text", "4102444800000"),
            ("None", None),
            ("bool", True),
            ("zero", 0),
            ("negative", -5),
            ("nan", float("nan")),
            ("big int", 2**60),
            ("list", [1]),
        ]
        for label, value in cases:
            lines.append(await attempt(f"set {label}", lambda value=value: s.setAlarm(value)))
            lines.append(await attempt(f"get after {label}", s.getAlarm))
        lines.append(
            await attempt(
                "set with options",
                lambda: s.setAlarm(4_102_444_800_000, {"allowUnconfirmed": True}),
            )
        )
        lines.append(await attempt("delete", s.deleteAlarm))
        lines.append(await attempt("get after delete", s.getAlarm))
        return lines

    async def arm(self):
        self.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS fired (retry_count, is_retry)")
        await self.ctx.storage.setAlarm(js.Date.now() + 1_000)
        return "armed"

    async def alarm(self, info=None):
        self.ctx.storage.sql.exec(
            "INSERT INTO fired VALUES (?, ?)", info.retryCount, 1 if info.isRetry else 0
        )

    async def fired(self):
        rows = self.ctx.storage.sql.exec("SELECT * FROM fired").toArray()
        return {
            "fired": [[row.retry_count, row.is_retry] for row in rows],
            "alarm": await self.ctx.storage.getAlarm(),
        }


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        parts = urlsplit(request.url).path.strip("/").split("/")
        env = self.env
        route = parts[0]
        if route == "started":
            result = await env.STARTED.getByName(parts[1]).visit()
        elif route == "blocked":
            result = await env.STARTED.getByName("blocking").blocked()
        elif route == "broken":
            result = [await failed_start(env.BROKEN.getByName("b")) for _ in (1, 2)]
        elif route == "remember":
            result = await env.RESETTABLE.getByName("r").remember(parts[1])
        elif route == "abort":
            stub = env.RESETTABLE.getByName("aborted")
            await stub.remember(f"before {parts[1]}")
            result = await attempt("abort", lambda: stub.abort_after_write(parts[1]))
        elif route == "state":
            result = await env.RESETTABLE.getByName("r").state()
        elif route == "aborted-state":
            result = await env.RESETTABLE.getByName("aborted").state()
        elif route == "identity":
            result = await env.RESETTABLE.getByName("identity").identity()
        elif route == "alarm-arguments":
            result = await env.ALARMED.getByName("arguments").arguments()
        elif route == "arm":
            result = await env.ALARMED.getByName("fires").arm()
        elif route == "fired":
            result = await env.ALARMED.getByName("fires").fired()
        else:
            return Response("unknown route", status=404)
        return Response(json.dumps(result, indent=1), headers={"content-type": "application/json"})
