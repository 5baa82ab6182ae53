"""Event topics: partitioned retained logs with consumer groups sharing the work.

Each `topic:partition` is its own durable object holding a `DurabilityLog`. Producers
push through a routing client (`DurabilityRouting.client`) that shards by the FNV-1a
hash of the partition key, so one key's events stay in order, and bounds every push
with a `timeout` transform. Each partition reports its load with every append (its
log gets `routing=`), and the client remembers it: a partition whose slowest consumer
group is more than `MAX_BACKLOG` records behind is not pushed to again until that
group catches up (429). A consumer group leases ranges from every partition; several
pollers of one group never get the same records, an unacknowledged range comes back
after its lease expires, and a range that keeps failing is parked after five
attempts. A named alarm enforces retention (seven days, 50,000 records or 256 MiB per
partition) every minute while there is anything to trim. With the `SEGMENTS_DIR` var
set (local runs only: Workers have no disk), flushed records stay readable from
segment files there; without it they are dropped.

The same file runs on Cloudflare and under `durability serve examples/event_topics`.
"""

import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from workers import DurableObject, Response, WorkerEntrypoint

from durability import (
    DurabilityAlarms,
    DurabilityLog,
    DurabilityScheduler,
    LogAppendInput,
    LogLeaseOptions,
    LogRetention,
    now_ms,
)
from durability.cold import FileColdStorage
from durability.routing import DurabilityRouting
from durability.transforms import CallerTimeoutError, timeout

PARTITIONS = 8
"""Partitions per topic. It decides where every key lives: changing it is a migration."""

RETENTION = LogRetention(
    max_age_ms=7 * 24 * 60 * 60 * 1000, max_records=50_000, max_bytes=256 * 1024 * 1024
)
RETENTION_SWEEP_MS = 60_000
LEASES_MS = 30_000
MAX_ATTEMPTS = 5
PUSH_TIMEOUT_MS = 5_000
MAX_BACKLOG = 10_000
"""Records the slowest group of a partition may lag before producers are turned away."""
WINDOW_S = 60
"""How long a partition's reported load counts (the load window): the `retry-after`."""


def partition_for(key):
    """FNV-1a over the key's UTF-16 code units, as a signed 32-bit value, modulo the
    partition count: the same key always lands on the same partition (and on the same
    one as in the TypeScript original)."""
    value = 2_166_136_261
    units = key.encode("utf-16-le")
    for index in range(0, len(units), 2):
        value = ((value ^ int.from_bytes(units[index : index + 2], "little")) * 16_777_619) & (
            0xFFFF_FFFF
        )
    signed = value - (1 << 32) if value & 0x8000_0000 else value
    return abs(signed) % PARTITIONS


class Partition(DurableObject):
    """One partition of one topic: a retained log, leases for groups, a retention alarm."""

    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        ctx.storage.sql.exec(
            "CREATE TABLE IF NOT EXISTS parked (consumer TEXT NOT NULL,"
            " first_offset INTEGER NOT NULL, body TEXT NOT NULL,"
            " PRIMARY KEY (consumer, first_offset))"
        )
        segments = getattr(env, "SEGMENTS_DIR", None)
        self.scheduler = DurabilityScheduler(context=ctx)
        # The load observer: every append reports this partition's load with its result.
        self.routing = DurabilityRouting()
        self.log = DurabilityLog(
            scheduler=self.scheduler,
            routing=self.routing,
            retention=RETENTION,
            cold=FileColdStorage(Path(segments) / str(ctx.id)) if segments else None,
            leases=LogLeaseOptions(
                max_parallelism=4,
                lease_ms=LEASES_MS,
                max_attempts=MAX_ATTEMPTS,
                on_poison=self._park,
            ),
        )
        self.alarms = DurabilityAlarms(
            scheduler=self.scheduler, handlers={"enforce_retention": self._enforce_retention}
        )

    async def append(self, batch):
        """Append a batch atomically; the first append arms the retention sweep.

        Returns the result as JSON: `success`, the offsets as `value`, and `load`,
        which the producer's routing client remembers.
        """
        result = await self.log.append(
            [LogAppendInput(event["body"], event.get("key")) for event in batch["events"]]
        )
        if result.success and not await self.ctx.storage.get("sweeping"):
            # Re-arming on every append would postpone the sweep while traffic flows.
            await self.ctx.storage.put("sweeping", True)
            await self.alarms.enforce_retention(now_ms() + RETENTION_SWEEP_MS)
        return result.to_json()

    async def lease(self, group, limit):
        """Hold the group's next range of this partition (None: nothing available now)."""
        lease = await self.log.lease(group, limit)
        if lease is None:
            return None
        return {
            "batch_id": lease.batch_id,
            "first_offset": lease.first_offset,
            "last_offset": lease.last_offset,
            "attempt": lease.attempt,
            "events": [record.body for record in lease.records],
        }

    async def ack(self, group, batch_id):
        await self.log.ack(group, batch_id)

    async def nack(self, group, batch_id):
        await self.log.nack(group, batch_id)

    async def status(self):
        """Offsets, committed cursors, backlog, and ranges parked as poison."""
        bounds = await self.log.bounds()
        load = await self.log.load()
        parked = self.ctx.storage.sql.exec(
            "SELECT body FROM parked ORDER BY consumer, first_offset"
        )
        return {
            "oldest_offset": bounds.oldest_offset,
            "hot_offset": bounds.hot_offset,
            "next_offset": bounds.next_offset,
            "cursors": await self.log.cursors(),
            "backlog": load.outbound.pending_deliveries,
            "parked": [json.loads(row.body) for row in parked],
        }

    async def alarm(self, alarm_info=None):
        await self.scheduler.alarm(alarm_info)

    async def _enforce_retention(self, info):
        await self.log.trim()
        bounds = await self.log.bounds()
        # Compare the hot window, not the oldest readable offset: flushed segments keep
        # that one low for ever, which would sweep for ever.
        if bounds.hot_offset < bounds.next_offset:
            await self.alarms.enforce_retention(now_ms() + RETENTION_SWEEP_MS)
        else:
            await self.ctx.storage.delete("sweeping")

    async def _park(self, lease):
        """A range failed MAX_ATTEMPTS times: keep it aside so the group moves on."""
        parked = {
            "group": lease.consumer,
            "first_offset": lease.first_offset,
            "last_offset": lease.last_offset,
            "events": [record.body for record in lease.records],
        }
        self.ctx.storage.sql.exec(
            "INSERT OR REPLACE INTO parked (consumer, first_offset, body) VALUES (?, ?, ?)",
            lease.consumer,
            lease.first_offset,
            json.dumps(parked),
        )


def _shard(batch, context, observations):
    """`topic:partition` of the batch's first event (a batch shares one partition),
    with the batch's region as a placement hint for a partition not created yet."""
    events = batch["events"]
    if not events:
        raise ValueError("an append must carry at least one event")
    first = events[0]["body"]
    shard = f"{first['topic']}:{partition_for(first['partitionKey'])}"
    region = batch.get("region")
    return shard if region is None else {"shard": shard, "location_hint": region}


class _Bindings:
    """The bindings of the Worker. They are the same for every request an isolate
    serves, so the one routing client below (and what it learned) outlives a request."""

    env = None


topics = DurabilityRouting.client(
    export_name="PARTITIONS",
    env=lambda: _Bindings.env,
    invoke=lambda stub, batch: stub.append(batch),
    sharding=_shard,
)
"""Producers push through this: it shards, calls `append` once, and remembers the load."""


def handle(events, fail_on):
    """Stands in for the group's real work; raises on a payload equal to `fail_on`."""
    for event in events:
        if fail_on is not None and event["payload"] == fail_on:
            raise RuntimeError(f"cannot handle {event['payload']!r}")


USAGE = """durability event topics demo
  POST /TOPIC/events[?region=HINT]   [{"partitionKey", "payload", "key"?}, ...]
  POST /TOPIC/groups/GROUP/poll      lease from every partition, handle, ack
                                     (?fail=PAYLOAD nacks ranges holding that payload)
  GET  /TOPIC                        bounds, cursors, backlog and parked ranges
"""


def _allowed(route):
    """The methods a route answers to; empty for a path that is no route."""
    match route:
        case [_, "events"] | [_, "groups", _, "poll"]:
            return ("POST",)
        case [_]:
            return ("GET",)
    return ()


def not_allowed(method, allowed):
    """405 for a route asked with the wrong method, naming the methods it takes."""
    text = f"{method} is not allowed here: use {' or '.join(allowed)}\n"
    return Response(text, status=405, headers={"allow": ", ".join(allowed)})


def json_response(value, status=200, headers=None):
    return Response(
        json.dumps(value),
        status=status,
        headers={"content-type": "application/json", **(headers or {})},
    )


class Default(WorkerEntrypoint):
    """Routes producers and consumer groups to the partitions of a topic."""

    async def fetch(self, request):
        _Bindings.env = self.env
        url = urlsplit(request.url)
        parts = [part for part in url.path.split("/") if part]
        query = {name: values[-1] for name, values in parse_qs(url.query).items()}
        match request.method, parts:
            case "POST", [topic, "events"]:
                return await _produce(topic, await request.text(), query.get("region"))
            case "POST", [topic, "groups", group, "poll"]:
                return await _poll(topic, group, query.get("fail"), self.env)
            case "GET", [topic]:
                stubs = [self.env.PARTITIONS.getByName(f"{topic}:{n}") for n in range(PARTITIONS)]
                return json_response([await stub.status() for stub in stubs])
        allowed = _allowed(parts)
        return not_allowed(request.method, allowed) if allowed else Response(USAGE, status=404)


def _parse(text):
    """The events of a POST body; ValueError says what is wrong."""
    # Demo input only: authenticate and validate untrusted payloads in a real service.
    events = json.loads(text)
    if not isinstance(events, list) or not all(
        isinstance(e, dict) and isinstance(e.get("partitionKey"), str) for e in events
    ):
        raise ValueError("expected a list of events with a partitionKey")
    return events


async def _produce(topic, text, region):
    try:
        events = _parse(text)
    except ValueError as error:
        return Response(str(error), status=400)
    batches = {}
    for event in events:
        body = {
            "topic": topic,
            "partitionKey": event["partitionKey"],
            "payload": event.get("payload"),
        }
        batches.setdefault(partition_for(event["partitionKey"]), []).append(
            {"body": body, "key": event.get("key")}
        )
    lagging = _lagging(topic, batches)
    if lagging:
        # Nothing of the batch is pushed. The producer's observation expires after its
        # window; the next push that succeeds then reports the partition's load afresh.
        body = {"error": "consumers are behind", "backlog": lagging}
        return json_response(body, status=429, headers={"retry-after": str(WINDOW_S)})
    results = {}
    for number, batch in sorted(batches.items()):
        append = {"events": batch} if region is None else {"events": batch, "region": region}
        try:
            results[str(number)] = await topics.with_(timeout, PUSH_TIMEOUT_MS).push(append)
        except CallerTimeoutError as error:
            # Uncertain: the append may still land. Retrying with the same keys is safe.
            return json_response({"error": str(error), "accepted": results}, status=504)
    accepted = all(result["success"] for result in results.values())
    # A rejected append is definite; a raised one is uncertain and may be retried with
    # the same keys, which deduplicate.
    return json_response(results, status=202 if accepted else 409)


def _lagging(topic, batches):
    """Partitions of `batches` whose last reported backlog is over MAX_BACKLOG."""
    observed = topics.observations()
    backlogs = {
        number: observed[f"{topic}:{number}"].outbound.pending_deliveries
        for number in batches
        if f"{topic}:{number}" in observed
    }
    return {str(number): lag for number, lag in backlogs.items() if lag > MAX_BACKLOG}


async def _poll(topic, group, fail_on, env):
    handled = []
    for number in range(PARTITIONS):
        stub = env.PARTITIONS.getByName(f"{topic}:{number}")
        lease = await stub.lease(group, 100)
        if lease is None:
            continue
        try:
            handle(lease["events"], fail_on)
        except RuntimeError:
            await stub.nack(group, lease["batch_id"])
            continue
        # Ack only once the work succeeded: a crash before it redelivers the range.
        await stub.ack(group, lease["batch_id"])
        handled.append({"partition": number, **lease})
    return json_response(handled)
