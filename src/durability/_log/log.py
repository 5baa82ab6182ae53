"""`DurabilityLog`: a retained, offset-addressed log inside one durable object.

Records get dense offsets from 0 and stay until `trim()` deletes them or flushes them
to cold storage, where they remain readable. Consumers pull and own their cursors;
optional leases let several workers of one consumer share the work. The live instance
holds only configuration: everything else, lease expiry included, is stored, so
eviction loses nothing. The log never sets the object's alarm and registers no due
work; schedule `trim()` yourself (a named alarm is the usual way).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, Unpack

from .._clock import now_ms
from .._context import Context
from .._engine import (
    LATEST,
    DurabilityScheduler,
    MigrationResult,
    MigrationTarget,
    SchedulerOptionArgs,
    as_context,
    attach_storage,
    migrate,
)
from .._errors import LogAppendError, serialize_error
from .._load import EnqueueResult, LoadSnapshot, RoutingLoad
from .._serialization import serialize
from .._types import MAX_SAFE_INTEGER
from .._uuid import random_uuid
from .._validate import check_positive_int, check_utf8
from .identity import object_id_of
from .leases import LogLeases
from .reader import LogReader
from .schema import LOG_LEASE_MIGRATIONS, LOG_MIGRATIONS
from .store import LogStore, NewRecord
from .trimming import Trimmer
from .types import (
    Body,
    LeaseRow,
    LogAppendInput,
    LogBounds,
    LogColdStorage,
    LogLease,
    LogLeaseOptions,
    LogPage,
    LogRetention,
)


def _utf8_length(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _offset(value: object, message: str) -> int:
    """`value` as an offset, else `LogAppendError(message)` (raised before any I/O)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SAFE_INTEGER:
        raise LogAppendError(message)
    return value


def _consumer(value: object) -> str:
    """`value` as a consumer name, else `LogAppendError` (raised before any I/O).

    Every method taking a consumer checks it here, so a name that cannot lease can
    neither hold a cursor nor be listed.
    """
    if not isinstance(value, str) or not value:
        raise LogAppendError("Consumer must be a non-empty string")
    return check_utf8("consumer", value)


class DurabilityLog(Generic[Body]):
    """A retained log in one durable object: append, read, commit cursors, trim, lease.

    Build it in the object's `__init__` (with `scheduler=` or `context=`) so every new
    instance finds its tables. `max_batch_size` caps appends, pages, lease ranges and
    each trim pass. Without `retention`, `trim()` removes nothing; without `cold`,
    trimmed records are deleted; without `leases`, the lease methods raise.
    """

    def __init__(
        self,
        *,
        scheduler: DurabilityScheduler | None = None,
        context: Context | None = None,
        max_batch_size: int = 100,
        retention: LogRetention | None = None,
        cold: LogColdStorage | None = None,
        leases: LogLeaseOptions | None = None,
        routing: RoutingLoad | None = None,
        **scheduler_options: Unpack[SchedulerOptionArgs],
    ) -> None:
        self._max_batch_size = check_positive_int("max_batch_size", max_batch_size)
        if retention is not None and not isinstance(retention, LogRetention):
            raise TypeError(f"retention must be a LogRetention, got {type(retention).__name__}")
        if cold is not None and not (
            callable(getattr(cold, "write", None)) and callable(getattr(cold, "read", None))
        ):
            raise TypeError("cold must have write(segment) and read(locator) methods")
        if leases is not None and not isinstance(leases, LogLeaseOptions):
            raise TypeError(f"leases must be a LogLeaseOptions, got {type(leases).__name__}")
        if routing is not None and not isinstance(routing, RoutingLoad):
            raise TypeError(f"routing must be a RoutingLoad, got {type(routing).__name__}")
        schemas = {"log": LOG_MIGRATIONS}
        if leases is not None:
            schemas["logLeases"] = LOG_LEASE_MIGRATIONS
        # Kept: it holds the log's place on the object's one scheduler.
        self._engine = attach_storage(
            scheduler=scheduler,
            context=context,
            kind="log",
            schemas=schemas,
            options=scheduler_options,
        )
        storage = self._engine.storage
        self._storage = storage
        self._object_id = object_id_of(scheduler, context)
        self._retention = retention
        self._cold = cold
        self._routing = routing if routing is not None else RoutingLoad()
        self._store = LogStore(storage)
        self._reader = LogReader(self._store, cold)
        self._trimmer = Trimmer(
            self._store, storage, self._object_id, retention, cold, max_batch_size
        )
        self._leases = (
            None
            if leases is None
            else LogLeases(storage, self._store, self._reader, leases, max_batch_size)
        )

    @classmethod
    def migrate(cls, context: Context, target: MigrationTarget = LATEST) -> MigrationResult:
        """Move only the `log` schema to `target` (`LATEST`, `None` for none, or a name)."""
        return migrate(as_context(context).storage, "log", LOG_MIGRATIONS, target)

    @property
    def max_batch_size(self) -> int:
        """The cap on append batches, pages, lease ranges and trim passes."""
        return self._max_batch_size

    async def append(
        self, records: LogAppendInput[Body] | Sequence[LogAppendInput[Body]]
    ) -> EnqueueResult[list[int]]:
        """Append one record or a batch atomically; the offsets come back in input order.

        A record whose deduplication key is still hot is not stored again: it gets the
        original offset (duplicates within the batch share one). Definite rejections
        come back as `success=False` and write nothing; a non-JSON body raises
        `TypeError`; a storage failure raises.
        """
        finish = self._routing.begin("inbound")
        try:
            batch = self._batch(records)
            rejection = self._rejection(batch)
            if rejection is not None:
                return EnqueueResult(False, None, serialize_error(rejection), await self.load())
            prepared = []
            for index, item in enumerate(batch):
                payload = serialize(item.body, f"records[{index}].body")
                key = item.deduplication_key
                prepared.append(
                    NewRecord(
                        key=random_uuid() if key is None else key,
                        payload=payload,
                        bytes=_utf8_length(payload),
                        user_key=key is not None,
                    )
                )
            offsets = self._store.append(prepared, now_ms())
            return EnqueueResult(True, offsets, None, await self.load())
        finally:
            finish()

    @staticmethod
    def _batch(records: object) -> list[LogAppendInput[Body]]:
        batch = [records] if isinstance(records, LogAppendInput) else records
        if not isinstance(batch, (list, tuple)):
            raise TypeError(
                f"records must be a LogAppendInput or a list of them, got {type(records).__name__}"
            )
        for index, item in enumerate(batch):
            if not isinstance(item, LogAppendInput):
                raise TypeError(
                    f"records[{index}] must be a LogAppendInput, got {type(item).__name__}"
                )
            key = item.deduplication_key
            if key is not None and not isinstance(key, str):
                raise TypeError(
                    f"records[{index}].deduplication_key must be a string, got {type(key).__name__}"
                )
            if key is not None:
                check_utf8(f"records[{index}].deduplication_key", key)
        return list(batch)

    def _rejection(self, batch: list[LogAppendInput[Body]]) -> LogAppendError | None:
        if not batch:
            return LogAppendError("Append requires at least one record")
        if len(batch) > self._max_batch_size:
            return LogAppendError(
                f"Append of {len(batch)} records exceeds maxBatchSize {self._max_batch_size}"
            )
        if any(item.deduplication_key == "" for item in batch):
            return LogAppendError("Append deduplication keys must be non-empty")
        return None

    async def read(self, from_offset: int, limit: int | None = None) -> LogPage[Body]:
        """Up to `limit` records from `from_offset`; reading never acknowledges anything.

        Below the hot window the page comes from one cold segment and never spans into
        the next one. Raises `LogTruncatedError` below the oldest readable offset or
        when a flushed segment is gone.
        """
        size = self._max_batch_size if limit is None else check_positive_int("limit", limit)
        start = _offset(from_offset, "Read offset must be a non-negative integer")
        bounds = self._store.bounds()
        records = await self._reader.page(start, min(size, self._max_batch_size), bounds)
        next_offset = records[-1].offset + 1 if records else max(start, bounds.next_offset)
        return LogPage(records, next_offset, max(0, bounds.next_offset - next_offset))

    async def bounds(self) -> LogBounds:
        """The oldest readable offset, the lowest hot offset and the next offset."""
        bounds = self._store.bounds()
        return LogBounds(bounds.oldest_offset, bounds.hot_offset, bounds.next_offset)

    async def cursor(self, consumer: str) -> int | None:
        """The committed cursor of `consumer`; `None` until it first commits."""
        return self._store.cursor(_consumer(consumer))

    async def commit(self, consumer: str, offset: int) -> None:
        """Advance `consumer`'s cursor to `offset`; an equal or lower offset is ignored."""
        value = _offset(offset, "Commit offset must be a non-negative integer")
        self._store.commit(_consumer(consumer), value, now_ms())

    async def cursors(self) -> dict[str, int]:
        """Every committed cursor, ordered by consumer name."""
        return self._store.cursors()

    async def load(self) -> LoadSnapshot:
        """Load telemetry; the backlog counts from the furthest-behind committed cursor."""
        return self._routing.snapshot(self._store.backlog())

    async def trim(self) -> int:
        """Apply retention oldest first; return how many records left the object.

        With cold storage each run of records is written and indexed before it is
        deleted, so a failed write keeps them hot. Cursors and leases are ignored:
        a consumer slower than retention gets `LogTruncatedError`.
        """
        return await self._trimmer.trim()

    async def forget_cold_before(self, offset: int) -> int:
        """Forget flushed segments that end below `offset`; reads there then truncate."""
        value = _offset(offset, "Offset must be a non-negative integer")
        return self._store.forget_segments_before(value)

    def _require_leases(self) -> LogLeases:
        if self._leases is None:
            raise TypeError("Leases require the leases option")
        return self._leases

    async def lease(self, consumer: str, limit: int | None = None) -> LogLease[Body] | None:
        """Hold a range of `consumer`'s records; `None` means nothing is available now.

        A range awaiting redelivery (nacked or expired) comes first, under a fresh
        batch id that fences its previous holder. If retention trimmed part of that
        range, this raises `LogTruncatedError` once and the next call carries on.
        """
        leases = self._require_leases()
        size = self._max_batch_size if limit is None else check_positive_int("limit", limit)
        return await leases.lease(_consumer(consumer), min(size, self._max_batch_size))

    async def ack(self, consumer: str, batch_id: str) -> None:
        """Settle a held range as processed; `LogLeaseError` if it is not held."""
        await self._require_leases().ack(_consumer(consumer), _batch_id(batch_id))

    async def nack(self, consumer: str, batch_id: str) -> None:
        """Give a held range back for redelivery; `LogLeaseError` if it is not held."""
        await self._require_leases().nack(_consumer(consumer), _batch_id(batch_id))

    async def leases(self, consumer: str) -> list[LeaseRow]:
        """The stored lease ranges of `consumer`, ordered by first offset (for operators)."""
        return self._require_leases().rows(_consumer(consumer))


def _batch_id(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"batch_id must be a string, got {type(value).__name__}")
    return value
