"""Email queue: a fanout to an email consumer and an archive, with dead letters and a redrive.

Each queue shard is an `EmailDelivery` object holding a `DurabilityFanout` with two
targets. `email` is a consumer: it sends each message through the mailer with the
message id as its idempotency key, and settles it by the answer (2xx: ack; 400:
dead letter, the address will never work; 429: retry in 30 s; anything else: left
unsettled, so it is retried by the policy and, after five attempts, dead-lettered for
this target only). `archive` is a storage target: each message is written to the
archive under its delivery id, never overwritten. A message leaves the queue once both
targets settled it.

Dead letters go to `email-dlq/<delivery id>`; `redrive(env)` puts them back through
routing (to their one target, keyed by their delivery id) and removes each entry only
once it was accepted again. Producers push through a routing client: a batch goes to
the shard of its lane (`?lane=vip`, carried as transform context by the `lane` caller
transform) or else of its customer (`customer-<id>`), with a `timeout` on every push.

The archive and the dead letters are files under the `STORAGE_DIR` var on a local run,
else entries of the `Store` object (Workers have no disk; on Cloudflare you would use
an R2 bucket). The mailer is the `MAILER` binding: here `Mailer`, a stand-in that
sends once per idempotency key. The same file runs on Cloudflare and under
`durability serve examples/email_queue`.
"""

import json
from urllib.parse import parse_qs, quote, unquote, urlsplit

from email_stores import FileStore, Store
from workers import DurableObject, Response, WorkerEntrypoint

from durability import (
    DurabilityFanout,
    DurabilityScheduler,
    FanoutInput,
    FanoutTarget,
    RetryPolicy,
    now_ms,
)
from durability.cloudflare import adapt
from durability.routing import DurabilityRouting
from durability.transforms import CallerTimeoutError, define_transform, timeout

__all__ = ["Default", "EmailDelivery", "Mailer", "Store", "redrive"]

ARCHIVE = "email-archive/"
DLQ = "email-dlq/"
DLQ_RETENTION_MS = 30 * 24 * 60 * 60 * 1000
"""Dead letters older than this are left to the bucket's lifecycle rule, not redriven."""
RATE_LIMITED_RETRY_MS = 30_000
PUSH_TIMEOUT_MS = 5_000
MAILER_NAME = "mailer"
STORE_NAME = "email"


def storage(env):
    """The archive and DLQ store: files under STORAGE_DIR when set, else the Store object."""
    directory = getattr(env, "STORAGE_DIR", None)
    return FileStore(directory) if directory else env.STORE.getByName(STORE_NAME)


class EmailDelivery(DurableObject):
    """One queue shard: every message owes a delivery to `email` and to `archive`."""

    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        self.store = storage(env)
        self.scheduler = DurabilityScheduler(context=ctx)
        self.routing = DurabilityRouting()
        self.fanout = DurabilityFanout(
            scheduler=self.scheduler,
            routing=self.routing,
            targets={
                "email": FanoutTarget(deliver=self._send),
                "archive": FanoutTarget(storage=self._archive),
            },
            max_batch_size=25,
            attempt_timeout_ms=30_000,
            retries=RetryPolicy(max_attempts=5),
            dlq=self._dead_letter,
        )

    async def enqueue(self, batch):
        """Accept `batch["messages"]` (`body`, optional `id` and `key`) for
        `batch["targets"]` (default: both) atomically; returns the result as JSON."""
        messages = [
            FanoutInput(message["body"], id=message.get("id"), deduplication_key=message.get("key"))
            for message in batch["messages"]
        ]
        result = await self.fanout.enqueue(messages, targets=batch.get("targets"))
        return result.to_json()

    async def pending(self):
        """Deliveries still owed by this shard (dead letters awaiting their write included)."""
        return (await self.fanout.load()).outbound.pending_deliveries

    async def alarm(self, alarm_info=None):
        await self.scheduler.alarm(alarm_info)

    async def _send(self, messages):
        mailer = self.env.MAILER.getByName(MAILER_NAME)
        for message in messages:
            # The message id is the idempotency key: every attempt sends the same email.
            answer = await mailer.send_email(message.id, message.body)
            status = answer["status"]
            if 200 <= status < 300:
                await message.ack()
            elif status == 400:
                await message.dead_letter()
            elif status == 429:
                await message.retry(RATE_LIMITED_RETRY_MS)
            # Any other answer leaves the message unsettled: the policy retries it.

    async def _archive(self, stored):
        await self.store.put(ARCHIVE + quote(stored.id, safe=""), stored.to_json())

    async def _dead_letter(self, stored):
        await self.store.put(DLQ + quote(stored.id, safe=""), stored.to_json())


class Mailer(DurableObject):
    """A stand-in email provider: sends once per idempotency key, answers with a status.

    A `to` without "@" answers 400. `fail` in the email is demo fault injection: the
    first that many requests for a key answer 503.
    """

    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        self.sql = adapt(ctx).storage.sql
        self.sql.exec(
            "CREATE TABLE IF NOT EXISTS sends (idempotency_key TEXT PRIMARY KEY,"
            " to_address TEXT NOT NULL, calls INTEGER NOT NULL, sent INTEGER NOT NULL)"
        )

    async def send_email(self, idempotency_key, email):
        """Send `email` unless this key was sent; returns `{"status": ...}`.

        Not named `send`: on Cloudflare a stub is a JavaScript proxy whose own `send`
        hides an RPC method of that name.
        """
        to = str(email.get("to", ""))
        self.sql.exec(
            "INSERT INTO sends (idempotency_key, to_address, calls, sent) VALUES (?, ?, 1, 0)"
            " ON CONFLICT (idempotency_key) DO UPDATE SET calls = calls + 1",
            idempotency_key,
            to,
        )
        row = self.sql.exec(
            "SELECT calls, sent FROM sends WHERE idempotency_key = ?", idempotency_key
        ).one()
        if row["sent"]:
            return {"status": 200}
        if "@" not in to:
            return {"status": 400}
        if row["calls"] <= email.get("fail", 0):
            return {"status": 503}
        self.sql.exec("UPDATE sends SET sent = 1 WHERE idempotency_key = ?", idempotency_key)
        return {"status": 202}

    async def sent_to(self, to):
        """The requests for `to`: per idempotency key, how many calls and whether it was sent."""
        rows = self.sql.exec(
            "SELECT idempotency_key, calls, sent FROM sends WHERE to_address = ?"
            " ORDER BY idempotency_key",
            to,
        )
        return [
            {"key": row["idempotency_key"], "calls": row["calls"], "sent": bool(row["sent"])}
            for row in rows
        ]


def _lane(name):
    """Caller side of `lane`: the push carries its lane as transform context."""

    async def handler(call):
        return await call.next(context={"lane": name})

    return handler


lane = define_transform().caller(_lane)


def shard_for(batch, context):
    """The lane given as context, else `customer-<id>` of the batch's first message."""
    lane_name = (context or {}).get("lane")
    if lane_name:
        return lane_name
    return f"customer-{batch['messages'][0]['body']['customerId']}"


def _sharding(batch, context, observations):
    first = batch["messages"][0]["body"]
    shard = shard_for(batch, context)
    region = first.get("region")
    return shard if region is None else {"shard": shard, "location_hint": region}


class _Bindings:
    """The bindings of the Worker. They are the same for every request an isolate
    serves, so the one routing client below outlives a request."""

    env = None


queues = DurabilityRouting.client(
    export_name="QUEUES",
    env=lambda: _Bindings.env,
    invoke=lambda stub, batch: stub.enqueue(batch),
    sharding=_sharding,
)


async def redrive(env, after=0):
    """Put dead letters stored since `after` (ms, and within 30 days) back on the queue.

    Each goes to its one target, keyed by its delivery id, so a redrive repeated after
    a crash is deduplicated while the first one is still queued; an entry is removed
    only once it was accepted again. One dead-lettered again while this runs is left
    for the next redrive, so a message that can never be delivered cannot loop.
    Returns how many were accepted.
    """
    _Bindings.env = env
    store = storage(env)
    started = now_ms()
    cutoff = max(after, started - DLQ_RETENTION_MS)
    accepted = 0
    cursor = None
    while page := await store.list(DLQ, cursor, 100):
        for entry in page:
            dead = entry["value"]
            if not cutoff <= dead["storedAt"] <= started:
                continue
            message = {"id": dead["messageId"], "body": dead["body"], "key": dead["id"]}
            batch = {"messages": [message], "targets": [dead["target"]]}
            result = await queues.with_(timeout, PUSH_TIMEOUT_MS).push(batch)
            if result["success"]:
                await store.delete(entry["key"])
                accepted += 1
        cursor = page[-1]["key"]
    return accepted


USAGE = """durability email queue demo
  POST /emails[?lane=LANE]   [{"id", "customerId", "to", "subject"?, "fail"?, "region"?}, ...]
                             one push per lane, or per customer without one
  GET  /queues/SHARD         deliveries SHARD still owes
  GET  /mailer/ADDRESS       what the mailer was asked to send to ADDRESS
  GET  /archive | /dlq       the archived deliveries | the dead letters
  POST /dlq/redrive[?after=MS]  put dead letters back on the queue
"""


def json_response(value, status=200):
    return Response(json.dumps(value), status=status, headers={"content-type": "application/json"})


MAX_FAIL = 100
"""The most demo failures (`fail`) an email may ask for."""

MAX_AFTER_MS = 2**53 - 1
"""The largest `after` accepted: the largest integer JSON numbers keep exactly."""


def _emails(text):
    """The emails of a POST body; ValueError says what is wrong."""
    # Demo input only: authenticate and validate untrusted payloads in a real service.
    emails = json.loads(text)
    if not isinstance(emails, list) or not all(
        isinstance(e, dict) and isinstance(e.get("customerId"), str) and e["customerId"]
        for e in emails
    ):
        raise ValueError("expected a list of emails, each with a customerId")
    for number, email in enumerate(emails):
        if not isinstance(email.get("to"), str):
            raise ValueError(f"email {number}: to must be a string")
        if email.get("id") is not None and not isinstance(email["id"], str):
            raise ValueError(f"email {number}: id must be a string when given")
        fail = email.get("fail", 0)
        if isinstance(fail, bool) or not isinstance(fail, int) or not 0 <= fail <= MAX_FAIL:
            raise ValueError(f"email {number}: fail must be a whole number from 0 to {MAX_FAIL}")
    return emails


def _after(query):
    """The `after` parameter in ms (0 when absent); ValueError says what is wrong."""
    text = query.get("after", "0")
    if not (text.isascii() and text.isdigit()) or int(text) > MAX_AFTER_MS:
        raise ValueError(f"after must be a whole number of ms from 0 to {MAX_AFTER_MS}")
    return int(text)


def _allowed(route):
    """The methods a route answers to; empty for a path that is no route."""
    match route:
        case ["emails"] | ["dlq", "redrive"]:
            return ("POST",)
        case ["queues", _] | ["mailer", _] | ["archive"] | ["dlq"]:
            return ("GET",)
    return ()


def not_allowed(method, allowed):
    """405 for a route asked with the wrong method, naming the methods it takes."""
    text = f"{method} is not allowed here: use {' or '.join(allowed)}\n"
    return Response(text, status=405, headers={"allow": ", ".join(allowed)})


class Default(WorkerEntrypoint):
    """Producers, the mailer's record, the archive, the DLQ and its redrive."""

    async def fetch(self, request):
        _Bindings.env = self.env
        url = urlsplit(request.url)
        parts = [part for part in url.path.split("/") if part]
        pairs = parse_qs(url.query, keep_blank_values=True).items()
        query = {name: values[-1] for name, values in pairs}
        match request.method, parts:
            case "POST", ["emails"]:
                if query.get("lane") == "":
                    return Response("lane must not be empty when given\n", status=400)
                return await _produce(await request.text(), query.get("lane"))
            case "GET", ["queues", shard]:
                return json_response(await self.env.QUEUES.getByName(shard).pending())
            case "GET", ["mailer", address]:
                mailer = self.env.MAILER.getByName(MAILER_NAME)
                return json_response(await mailer.sent_to(unquote(address)))
            case "GET", ["archive" | "dlq" as which]:
                prefix = ARCHIVE if which == "archive" else DLQ
                entries = await storage(self.env).list(prefix, None, 1000)
                return json_response([entry["value"] for entry in entries])
            case "POST", ["dlq", "redrive"]:
                # An administrative action: protect it in a real service.
                try:
                    since = _after(query)
                except ValueError as error:
                    return Response(f"{error}\n", status=400)
                return json_response({"redriven": await redrive(self.env, since)})
        allowed = _allowed(parts)
        return not_allowed(request.method, allowed) if allowed else Response(USAGE, status=404)


async def _produce(text, lane_name):
    try:
        emails = _emails(text)
    except ValueError as error:
        return Response(str(error), status=400)
    groups = {}
    for email in emails:
        group = lane_name or email["customerId"]
        message = {"body": email} if email.get("id") is None else {"id": email["id"], "body": email}
        groups.setdefault(group, []).append(message)
    producer = queues if lane_name is None else queues.with_(lane, lane_name)
    answers = []
    for messages in groups.values():
        batch = {"messages": messages}
        shard = shard_for(batch, {"lane": lane_name})
        try:
            result = await producer.with_(timeout, PUSH_TIMEOUT_MS).push(batch)
        except CallerTimeoutError as error:
            # Uncertain: the batch may still be accepted. Retrying with the same ids is safe.
            return json_response({"error": str(error), "accepted": answers}, status=504)
        answers.append({"shard": shard, **result})
    status = 202 if all(answer["success"] for answer in answers) else 409
    return json_response(answers, status=status)
