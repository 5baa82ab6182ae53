"""Event topics: partitioned retained logs with consumer groups sharing the work.

Each `topic:partition` is its own durable object holding a `DurabilityLog`. Producers
hash a partition key to a partition, so one key's events stay in order. A consumer
group leases ranges from every partition; several pollers of one group never get the
same records, an unacknowledged range comes back after its lease expires, and a range
that keeps failing is parked after five attempts. A named alarm enforces retention
(one day, or 10,000 records per partition) every hour while there is anything to
trim. With the `SEGMENTS_DIR` var set (local runs only: Workers have no disk), flushed
records stay readable from segment files there; without it they are dropped.

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

PARTITIONS = 4
RETENTION_SWEEP_MS = 60 * 60 * 1000
RETENTION = LogRetention(max_age_ms=24 * 60 * 60 * 1000, max_records=10_000)
LEASES_MS = 30_000
MAX_ATTEMPTS = 5


def partition_for(key):
    """FNV-1a of the partition key: the same key always lands on the same partition."""
    value = 2_166_136_261
    for char in key:
        value = ((value ^ ord(char)) * 16_777_619) & 0xFFFF_FFFF
    return value % PARTITIONS


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
        self.log = DurabilityLog(
            scheduler=self.scheduler,
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

    async def append(self, events):
        """Append a batch atomically; the first append arms the retention sweep."""
        result = await self.log.append(
            [LogAppendInput(event["body"], event.get("key")) for event in events]
        )
        if not result.success:
            assert result.error is not None
            return {"accepted": False, "error": result.error.message}
        if not await self.ctx.storage.get("sweeping"):
            # Re-arming on every append would postpone the sweep while traffic flows.
            await self.ctx.storage.put("sweeping", True)
            await self.alarms.enforce_retention(now_ms() + RETENTION_SWEEP_MS)
        return {"accepted": True, "offsets": result.value}

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


def handle(events, fail_on):
    """Stands in for the group's real work; raises on a payload equal to `fail_on`."""
    for event in events:
        if fail_on is not None and event["payload"] == fail_on:
            raise RuntimeError(f"cannot handle {event['payload']!r}")


USAGE = """durability event topics demo
  POST /TOPIC/events                 [{"partitionKey", "payload", "key"?}, ...]
  POST /TOPIC/groups/GROUP/poll      lease from every partition, handle, ack
                                     (?fail=PAYLOAD nacks ranges holding that payload)
  GET  /TOPIC                        bounds, cursors, backlog and parked ranges
"""


def json_response(value, status=200):
    return Response(json.dumps(value), status=status, headers={"content-type": "application/json"})


class Default(WorkerEntrypoint):
    """Routes producers and consumer groups to the partitions of a topic."""

    async def fetch(self, request):
        url = urlsplit(request.url)
        parts = [part for part in url.path.split("/") if part]
        query = {name: values[-1] for name, values in parse_qs(url.query).items()}
        match request.method, parts:
            case "POST", [topic, "events"]:
                return await _produce(topic, await request.text(), self.env)
            case "POST", [topic, "groups", group, "poll"]:
                return await _poll(topic, group, query.get("fail"), self.env)
            case "GET", [topic]:
                stubs = [self.env.PARTITIONS.getByName(f"{topic}:{n}") for n in range(PARTITIONS)]
                return json_response([await stub.status() for stub in stubs])
        return Response(USAGE, status=404)


async def _produce(topic, text, env):
    # Demo input only: authenticate and validate untrusted payloads in a real service.
    try:
        events = json.loads(text)
        if not isinstance(events, list) or not all(
            isinstance(e, dict) and isinstance(e.get("partitionKey"), str) for e in events
        ):
            raise ValueError("expected a list of events with a partitionKey")
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
    results = {}
    for number, batch in sorted(batches.items()):
        results[str(number)] = await env.PARTITIONS.getByName(f"{topic}:{number}").append(batch)
    accepted = all(result["accepted"] for result in results.values())
    # A rejected append is definite; a raised one is uncertain and may be retried with
    # the same keys, which deduplicate.
    return json_response(results, status=202 if accepted else 409)


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
