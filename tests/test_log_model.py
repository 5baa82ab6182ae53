"""A stateful property test: the log against a small in-memory model of its rules.

Hypothesis drives random appends (with and without deduplication keys), reads,
commits, trims (to a cold store), forgetting of segments, leases, acks, nacks, time
and evictions against one log in a real runtime, and checks every answer, bounds and
cursors against the model after each step. Each example runs on a fresh event loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from _cloudflare_double import BUILTIN, WORKERS_SDK, install
from _hosts import hosting
from _log_host import LogConfig, partition, runtime
from conftest import START_MS
from durability import (
    LogLease,
    LogLeaseError,
    LogLeaseOptions,
    LogRetention,
    LogTruncatedError,
)
from durability.testing import VirtualClock
from test_log_retention import MemoryCold

pytestmark = pytest.mark.slow

MAX_BATCH = 4
MAX_RECORDS = 5
LEASE_MS = 1_000
MAX_PARALLELISM = 2
MAX_ATTEMPTS = 3
GROUP = "g"


@dataclass
class Range:
    """The model of one stored lease row; `batch_id` is None once nobody can hold it."""

    batch_id: str | None
    first: int
    last: int
    state: str
    attempt: int
    expires_at: int


class LogModel(RuleBasedStateMachine):
    """The real log in a runtime beside the model of what it must answer."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = VirtualClock(START_MS)
        self.config = LogConfig(
            max_batch_size=MAX_BATCH,
            retention=LogRetention(max_records=MAX_RECORDS),
            cold=MemoryCold(),
        )

        async def on_poison(lease: LogLease[Any]) -> None:
            self.config.poisoned.append(lease)

        self.config.leases = LogLeaseOptions(
            max_parallelism=MAX_PARALLELISM,
            lease_ms=LEASE_MS,
            max_attempts=MAX_ATTEMPTS,
            on_poison=on_poison,
        )
        self.rt = runtime(self.config, self.clock)
        self.run(self.rt.start())
        self.p = partition(self.rt)
        self.bodies: dict[int, tuple[str, Any]] = {}
        self.keys: dict[str, int] = {}
        self.next = 0
        self.hot = 0
        self.segments: list[tuple[int, int]] = []
        self.cursors: dict[str, int] = {}
        self.ranges: list[Range] = []
        self.allocation = 0
        self.batch_ids: list[str] = []
        self.poisoned = 0

    def run(self, awaitable: Any) -> Any:
        return self.loop.run_until_complete(awaitable)

    def teardown(self) -> None:
        self.run(self.rt.close())
        self.loop.close()

    @property
    def oldest(self) -> int:
        return self.segments[0][0] if self.segments else self.hot

    # -- appends, reads, cursors ------------------------------------------------------

    @initialize(count=st.integers(1, 3))
    def fill(self, count: int) -> None:
        for _ in range(count):
            self.append([(index, None) for index in range(MAX_BATCH)])

    @rule(
        batch=st.lists(
            st.tuples(st.integers(0, 9), st.sampled_from([None, "k1", "k2", "k3", "k4"])),
            min_size=1,
            max_size=MAX_BATCH,
        )
    )
    def append(self, batch: list[tuple[int, str | None]]) -> None:
        result = self.run(self.p.append([list(item) for item in batch]))
        fresh: dict[str, int] = {}
        expected = []
        for body, key in batch:
            if key is not None and key in self.keys:
                expected.append(self.keys[key])
                continue
            if key is None or key not in fresh:
                fresh_key = key if key is not None else f"random-{self.next + len(fresh)}"
                fresh[fresh_key] = self.next + len(fresh)
                key = fresh_key
            offset = fresh[key]
            self.bodies[offset] = (key, body)
            expected.append(offset)
        for key, offset in fresh.items():
            if not key.startswith("random-"):
                self.keys[key] = offset
        self.next += len(fresh)
        assert result["success"] is True
        assert result["value"] == expected

    @rule(start=st.integers(0, 40), limit=st.integers(1, 6))
    def read(self, start: int, limit: int) -> None:
        try:
            page = self.run(self.p.read(start, limit))
        except LogTruncatedError as error:
            assert start < self.oldest
            assert (error.requested_offset, error.oldest_offset) == (start, self.oldest)
            return
        assert start >= self.oldest
        expected = self.page(start, min(limit, MAX_BATCH))
        assert [r["offset"] for r in page["records"]] == expected
        for record in page["records"]:
            key, body = self.bodies[record["offset"]]
            assert record["body"] == body
            if not key.startswith("random-"):
                assert record["deduplication_key"] == key
        next_offset = expected[-1] + 1 if expected else max(start, self.next)
        assert page["next_offset"] == next_offset
        assert page["lag"] == max(0, self.next - next_offset)

    def page(self, start: int, size: int) -> list[int]:
        """The offsets a read (or a new lease) from `start` returns."""
        end = min(start + size, self.next)
        if start < self.hot:
            segment_last = next(last for first, last in self.segments if first <= start <= last)
            end = min(end, segment_last + 1)
        return list(range(start, end))

    @rule(consumer=st.sampled_from(["c", GROUP]), offset=st.integers(0, 40))
    def commit(self, consumer: str, offset: int) -> None:
        self.run(self.p.commit(consumer, offset))
        self.cursors[consumer] = max(self.cursors.get(consumer, -1), offset)

    @rule()
    def trim(self) -> None:
        removed = self.run(self.p.trim())
        expected = 0
        while self.next - self.hot > MAX_RECORDS:
            count = min(MAX_BATCH, self.next - self.hot - MAX_RECORDS)
            first, last = self.hot, self.hot + count - 1
            self.segments.append((first, last))
            for offset in range(first, last + 1):
                key = self.bodies[offset][0]
                if self.keys.get(key) == offset:
                    del self.keys[key]
            self.hot = last + 1
            expected += count
        assert removed == expected

    @rule(offset=st.integers(0, 40))
    def forget(self, offset: int) -> None:
        forgotten = self.run(self.p.forget_cold_before(offset))
        kept = [segment for segment in self.segments if segment[1] >= offset]
        assert forgotten == len(self.segments) - len(kept)
        self.segments = kept

    # -- leases -----------------------------------------------------------------------

    @rule(limit=st.integers(1, MAX_BATCH))
    def lease(self, limit: int) -> None:
        now = self.clock.now_ms()
        try:
            lease = self.run(self.p.lease(GROUP, limit))
        except LogTruncatedError as error:
            claimed = self.claimable(now)
            assert claimed is not None and claimed.first < self.oldest
            assert (error.requested_offset, error.oldest_offset) == (claimed.first, self.oldest)
            claimed.batch_id = None
            claimed.expires_at = 0
            if claimed.last < self.oldest:
                claimed.state = "skipped"
            else:
                claimed.state, claimed.first = "pending", self.oldest
            return
        claimed = self.claimable(now)
        if claimed is not None:
            assert claimed.first >= self.oldest
            claimed.attempt += 1
            claimed.state, claimed.expires_at = "active", now + LEASE_MS
            if claimed.attempt > MAX_ATTEMPTS:
                assert lease is None
                claimed.state, claimed.batch_id = "skipped", None
                self.poisoned += 1
                return
            assert lease is not None
            assert (lease["first_offset"], lease["last_offset"]) == (claimed.first, claimed.last)
            assert lease["attempt"] == claimed.attempt
            claimed.batch_id = lease["batch_id"]
        else:
            expected = self.new_range(now, limit)
            if not expected:
                assert lease is None
                return
            assert lease is not None
            assert [lease["first_offset"], lease["last_offset"], lease["attempt"]] == [
                expected[0],
                expected[-1],
                1,
            ]
            self.ranges.append(
                Range(lease["batch_id"], expected[0], expected[-1], "active", 1, now + LEASE_MS)
            )
            self.allocation = expected[-1] + 1
        assert lease["expires_at"] == now + LEASE_MS
        assert [r["offset"] for r in lease["records"]] == list(
            range(lease["first_offset"], lease["last_offset"] + 1)
        )
        assert [r["body"] for r in lease["records"]] == [
            self.bodies[r["offset"]][1] for r in lease["records"]
        ]
        self.batch_ids.append(lease["batch_id"])

    def claimable(self, now: int) -> Range | None:
        waiting = [
            r
            for r in self.ranges
            if r.state == "pending" or (r.state == "active" and r.expires_at <= now)
        ]
        return min(waiting, key=lambda r: r.first) if waiting else None

    def new_range(self, now: int, limit: int) -> list[int]:
        held = [
            r
            for r in self.ranges
            if r.state == "pending" or (r.state == "active" and r.expires_at > now)
        ]
        if len(held) >= MAX_PARALLELISM:
            return []
        start = max(self.oldest, self.cursors.get(GROUP, 0), self.allocation)
        if start >= self.next:
            return []
        return self.page(start, limit)

    def settle(self, index: int, ack: bool) -> None:
        batch_id = self.batch_ids[-1 - index % len(self.batch_ids)]
        held = [r for r in self.ranges if r.batch_id == batch_id and r.state == "active"]
        settle = self.p.ack if ack else self.p.nack
        try:
            self.run(settle(GROUP, batch_id))
        except LogLeaseError:
            assert not held
            return
        assert held
        [row] = held
        if not ack:
            row.state, row.expires_at = "pending", 0
            return
        row.state, row.expires_at = "acked", self.clock.now_ms()
        cursor = max(self.cursors.get(GROUP, 0), self.oldest)
        done = []
        for r in sorted(self.ranges, key=lambda r: r.first):
            if r.last < cursor:
                continue
            if r.first > cursor or r.state not in ("acked", "skipped"):
                break
            cursor = max(cursor, r.last + 1)
            done.append(r)
        if done:
            self.cursors[GROUP] = max(self.cursors.get(GROUP, -1), cursor)
            self.ranges = [
                r
                for r in self.ranges
                if r not in done and not (r.last < cursor and r.state in ("acked", "skipped"))
            ]

    @precondition(lambda self: self.batch_ids)
    @rule(index=st.integers(0, 50))
    def ack(self, index: int) -> None:
        self.settle(index, ack=True)

    @precondition(lambda self: self.batch_ids)
    @rule(index=st.integers(0, 50))
    def nack(self, index: int) -> None:
        self.settle(index, ack=False)

    # -- time and instances -----------------------------------------------------------

    @rule(ms=st.sampled_from([1, 500, LEASE_MS]))
    def advance(self, ms: int) -> None:
        self.run(self.clock.advance(ms))

    @rule(crash=st.booleans())
    def evict(self, crash: bool) -> None:
        self.run(self.rt.crash(self.p) if crash else self.rt.evict(self.p))

    # -- invariants -------------------------------------------------------------------

    @invariant()
    def bounds_and_cursors_match(self) -> None:
        bounds = self.run(self.p.bounds())
        assert bounds == {
            "oldest_offset": self.oldest,
            "hot_offset": self.hot,
            "next_offset": self.next,
        }
        assert self.run(self.p.cursors()) == dict(sorted(self.cursors.items()))
        rows = self.run(self.p.leases(GROUP))
        expected = sorted(self.ranges, key=lambda r: r.first)
        assert [(r["first_offset"], r["last_offset"], r["state"]) for r in rows] == [
            (r.first, r.last, r.state) for r in expected
        ]
        assert len(self.config.poisoned) == self.poisoned


class CloudflareLogModel(LogModel):
    """The same model, with the log's object hosted as on Cloudflare (the ctx double)."""

    flavour = WORKERS_SDK

    def __init__(self) -> None:
        self.patch = pytest.MonkeyPatch()
        self.platform = install(self.patch, self.flavour)
        with hosting(self.platform):
            super().__init__()

    def teardown(self) -> None:
        try:
            super().teardown()
            assert [ctx.complaints for ctx in self.platform.made if ctx.complaints] == []
        finally:
            self.patch.undo()


class BuiltinSdkLogModel(CloudflareLogModel):
    """The model on the built-in SDK's flavour of the double."""

    flavour = BUILTIN


LogModel.TestCase.settings = settings(
    max_examples=120,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLogModel = LogModel.TestCase
for model in (CloudflareLogModel, BuiltinSdkLogModel):
    model.TestCase.settings = settings(LogModel.TestCase.settings, max_examples=40)
TestLogModelOnWorkersSdk = CloudflareLogModel.TestCase
TestLogModelOnBuiltinSdk = BuiltinSdkLogModel.TestCase
