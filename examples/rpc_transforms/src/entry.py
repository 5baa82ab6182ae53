"""Call transforms around a Durable Object's RPC: observability, a timeout and retries.

An `observability` transform has two sides. In the Worker (the caller) it adds a
request id to the call's transform context; in the object (the callee) it times every
method and records the metric with that request id. The Worker also bounds each call
with `timeout` and retries failures with `retry`, attached after the context-producing
transform, so the one timeout bounds all the retries together.

The same file runs on Cloudflare (`pywrangler deploy`) and locally
(`durability serve examples/rpc_transforms`).
"""

import asyncio
import json
import uuid
from urllib.parse import parse_qs, urlsplit

from workers import DurableObject, Response, WorkerEntrypoint

from durability import now_ms
from durability.transforms import (
    CallerTimeoutError,
    apply_transforms,
    create_transform_stub,
    define_transform,
    retry,
    timeout,
)

DEFAULT_TIMEOUT_MS = 5_000
RETRIES = 2
KEPT_METRICS = 50


def _add_request_id(request_id):
    """Caller side: every call made through the stub carries the request id."""

    async def handler(call):
        return await call.next(context={"requestId": request_id})

    return handler


def _time_the_method(options):
    """Callee side: time the method, print the metric, keep the latest in the object."""

    async def handler(call):
        started = now_ms()
        outcome = "error"
        try:
            result = await call.next()
            outcome = "ok"
            return result
        finally:
            metric = {
                "metric": "rpc.duration",
                "method": call.method,
                "requestId": call.context.get("requestId"),
                "durationMs": now_ms() - started,
                "outcome": outcome,
            }
            print(json.dumps(metric))
            call.state.storage.sql.exec(
                "INSERT INTO metrics (entry) VALUES (?)", json.dumps(metric)
            )
            call.state.storage.sql.exec(
                "DELETE FROM metrics WHERE id <= (SELECT max(id) FROM metrics) - ?", KEPT_METRICS
            )

    return handler


observability = define_transform().caller(_add_request_id).callee(_time_the_method)


class Counter(DurableObject):
    """A counter whose increments are idempotent per request id, so retries are safe."""

    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        ctx.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS applied (request_id TEXT PRIMARY KEY, value INTEGER)"
        )
        ctx.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS metrics (id INTEGER PRIMARY KEY, entry TEXT NOT NULL)"
        )
        # Demo fault injection, in memory: attempts seen per request id.
        self.attempts = {}

    async def increment(self, request_id, fail_first=0, delay_ms=0):
        """Add one, once per request id; the first `fail_first` attempts raise."""
        attempt = self.attempts.get(request_id, 0) + 1
        self.attempts[request_id] = attempt
        if attempt <= fail_first:
            raise ConnectionError(f"injected failure {attempt} of {fail_first}")
        if delay_ms:
            await asyncio.sleep(delay_ms / 1000)
        applied = self.ctx.storage.sql.exec(
            "SELECT value FROM applied WHERE request_id = ?", request_id
        ).toArray()
        if not applied:
            self.ctx.storage.sql.exec(
                "INSERT INTO applied (request_id, value) "
                "VALUES (?, (SELECT count(*) FROM applied) + 1)",
                request_id,
            )
        value = self.ctx.storage.sql.exec(
            "SELECT value FROM applied WHERE request_id = ?", request_id
        ).one()
        return {"value": value.value, "attempts": attempt}

    async def state(self):
        """The counter's value and its latest metrics, oldest first."""
        value = self.ctx.storage.sql.exec("SELECT count(*) AS value FROM applied").one()
        metrics = self.ctx.storage.sql.exec("SELECT entry FROM metrics ORDER BY id").toArray()
        return {"value": value.value, "metrics": [json.loads(row.entry) for row in metrics]}


apply_transforms(Counter, all=[observability])


USAGE = """durability rpc transforms demo
  POST /NAME/increment[?fail=N&delay_ms=MS&timeout_ms=MS]
        add one; the object fails the first N attempts and takes MS to answer;
        the Worker retries twice and gives up after timeout_ms (default 5000)
  GET  /NAME            value and the latest per-call metrics (method, requestId, ms)
"""


def json_response(value, status=200):
    return Response(json.dumps(value), status=status, headers={"content-type": "application/json"})


PARAMS = {
    "fail": (0, 0, 100),
    "delay_ms": (0, 0, 60_000),
    "timeout_ms": (DEFAULT_TIMEOUT_MS, 1, 60_000),
}
"""Each query parameter of `increment`: its default and the least and most accepted."""


def _int_params(query):
    """`fail`, `delay_ms` and `timeout_ms` as ints (defaults when absent); ValueError
    names the first that is not a whole number in its range."""
    values = {}
    for name, (default, least, most) in PARAMS.items():
        text = query.get(name, [str(default)])[-1]
        if not (text.isascii() and text.isdigit()) or not least <= int(text) <= most:
            raise ValueError(f"{name} must be a whole number from {least} to {most}")
        values[name] = int(text)
    return values


def _allowed(route):
    """The methods a route answers to; empty for a path that is no route."""
    match route:
        case []:
            return ("GET",)
        case ["increment"]:
            return ("POST",)
    return ()


def not_allowed(method, allowed):
    """405 for a route asked with the wrong method, naming the methods it takes."""
    text = f"{method} is not allowed here: use {' or '.join(allowed)}\n"
    return Response(text, status=405, headers={"allow": ", ".join(allowed)})


class Default(WorkerEntrypoint):
    """Calls the counter named by the path through a stub with transforms attached."""

    async def fetch(self, request):
        url = urlsplit(request.url)
        parts = [part for part in url.path.split("/") if part]
        if not parts:
            return Response(USAGE)
        stub = self.env.COUNTERS.getByName(parts[0])
        match request.method, parts[1:]:
            case "GET", []:
                return json_response(await stub.state())
            case "POST", ["increment"]:
                try:
                    params = _int_params(parse_qs(url.query, keep_blank_values=True))
                except ValueError as error:
                    return Response(f"{error}\n", status=400)
                return await self._increment(stub, params, request)
        allowed = _allowed(parts[1:])
        return not_allowed(request.method, allowed) if allowed else Response(USAGE, status=404)

    async def _increment(self, stub, params, request):
        request_id = request.headers.get("x-request-id") or uuid.uuid4().hex
        counter = (
            create_transform_stub(stub)
            .with_(observability, request_id)
            .with_(timeout, params["timeout_ms"])
            .with_(retry, RETRIES)
        )
        try:
            result = await counter.increment(request_id, params["fail"], params["delay_ms"])
        except CallerTimeoutError as error:
            # The call was not cancelled: the object may still apply it. The request id
            # makes a client's retry of this request safe.
            return json_response({"error": str(error), "requestId": request_id}, status=504)
        except Exception as error:
            return json_response({"error": str(error), "requestId": request_id}, status=502)
        return json_response({**result, "requestId": request_id})
