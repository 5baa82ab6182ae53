"""The table of bad inputs in docs/reliability.md, tried for real.

Each case is one bad input at one place of the API, made inside a live object (or at a
constructor); it must raise the error class the table names with a message naming
the field and the rule, and leave every table, key and the alarm of the object as
they were. `python tests/test_bad_input_table.py` prints the table's rows as the code
answers them today.
"""

from __future__ import annotations

import asyncio
import datetime
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from durability import (
    Durability,
    DurabilityAlarms,
    DurabilityFanout,
    DurabilityLog,
    DurabilityScheduler,
    EnqueueResult,
    FanoutEnqueueError,
    FanoutInput,
    FanoutTarget,
    LogAppendError,
    LogAppendInput,
    LogLeaseError,
    LogLeaseOptions,
    LogRetention,
    RetryPolicy,
)
from durability.runtime import DurableObject, Runtime
from durability.runtime._js_errors import JsException
from durability.testing import VirtualClock


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


LONE = "m\ud800"
"""A `str` with a lone surrogate: valid in Python, not encodable as UTF-8."""

UTF8 = "must be valid UTF-8 text (no lone surrogates)"


@dataclass(frozen=True)
class Case:
    """One bad input: what it is, where it goes, the call, the error it must get."""

    what: str
    where: str
    call: Callable[[Any], Any]
    error: type[Exception]
    says: str


IN_OBJECT = [
    Case("empty id", "operation", lambda o: o.ops.op(id="", payload=1), ValueError, "id must"),
    Case("id not a str", "operation", lambda o: o.ops.op(id=5), TypeError, "id must be a string"),
    Case("a lone surrogate", "operation id", lambda o: o.ops.op(id=LONE), ValueError, UTF8),
    Case(
        "a lone surrogate",
        "operation id (job handle)",
        lambda o: o.ops.op.job(LONE),
        ValueError,
        UTF8,
    ),
    Case(
        "unknown name", "operation", lambda o: o.ops.operation("nope")(id="x"), ValueError, "nope"
    ),
    Case("a set", "payload", lambda o: o.ops.op(id="x", payload={1}), TypeError, "JSON value"),
    Case("NaN", "payload", lambda o: o.ops.op(id="x", payload=math.nan), TypeError, "finite"),
    Case(
        "a non-string key", "payload", lambda o: o.ops.op(id="x", payload={1: 2}), TypeError, "key"
    ),
    Case(
        "a list 5,000 deep",
        "payload",
        lambda o: o.ops.op(id="x", payload=_nested(5_000)),
        TypeError,
        "256 levels deep",
    ),
    Case(
        "over 2,000,000 bytes",
        "payload",
        lambda o: o.ops.op(id="x", payload="x" * 2_000_001),
        ValueError,
        "at most 2,000,000 bytes",
    ),
    Case(
        "a negative time", "named alarm", lambda o: o.alarms.tick(-1), ValueError, "scheduled_time"
    ),
    Case(
        "a naive datetime",
        "named alarm",
        lambda o: o.alarms.tick(datetime.datetime(2030, 1, 1)),
        ValueError,
        "aware datetime",
    ),
    Case("a str", "named alarm", lambda o: o.alarms.tick("soon"), TypeError, "scheduled_time"),
    Case("True", "named alarm", lambda o: o.alarms.tick(True), TypeError, "scheduled_time"),
    Case("unknown name", "named alarm", lambda o: o.alarms.named("nope")(1), ValueError, "nope"),
    Case(
        "NaN",
        "log body",
        lambda o: o.log.append(LogAppendInput(math.nan)),
        TypeError,
        "records[0].body must be a finite number",
    ),
    Case(
        "over 2,000,000 bytes",
        "log body",
        lambda o: o.log.append(LogAppendInput("x" * 2_000_001)),
        ValueError,
        "at most 2,000,000 bytes",
    ),
    Case(
        "an int",
        "log deduplication key",
        lambda o: o.log.append(LogAppendInput(1, 5)),  # type: ignore[arg-type]
        TypeError,
        "deduplication_key must be a string",
    ),
    Case(
        "a lone surrogate",
        "log deduplication key",
        lambda o: o.log.append(LogAppendInput(1, LONE)),
        ValueError,
        "records[0].deduplication_key must be valid UTF-8",
    ),
    Case("-1", "log read offset", lambda o: o.log.read(-1), LogAppendError, "Read offset"),
    Case("0", "log read limit", lambda o: o.log.read(0, 0), ValueError, "limit must"),
    Case(
        "empty", "log consumer (commit)", lambda o: o.log.commit("", 0), LogAppendError, "Consumer"
    ),
    Case("empty", "log consumer (lease)", lambda o: o.log.lease(""), LogAppendError, "Consumer"),
    Case(
        "a lone surrogate",
        "log consumer (commit)",
        lambda o: o.log.commit(LONE, 0),
        ValueError,
        "consumer must be valid UTF-8",
    ),
    Case(
        "a lone surrogate",
        "log consumer (lease)",
        lambda o: o.log.lease(LONE),
        ValueError,
        "consumer must be valid UTF-8",
    ),
    Case(
        "a lone surrogate",
        "fanout message id",
        lambda o: o.fanout.enqueue(FanoutInput(1, id=LONE)),
        ValueError,
        "messages[0].id must be valid UTF-8",
    ),
    Case(
        "a lone surrogate",
        "fanout deduplication key",
        lambda o: o.fanout.enqueue([FanoutInput(1), FanoutInput(2, deduplication_key=LONE)]),
        ValueError,
        "messages[1].deduplication_key must be valid UTF-8",
    ),
    Case(
        "a set",
        "fanout body",
        lambda o: o.fanout.enqueue([FanoutInput(1), FanoutInput({1})]),
        TypeError,
        "messages[1].body must be a JSON value",
    ),
    Case(
        "over 2,000,000 bytes",
        "fanout body",
        lambda o: o.fanout.enqueue([FanoutInput(1), FanoutInput("x" * 2_000_001)]),
        ValueError,
        "messages[1].body: takes",
    ),
    Case(
        "a lone surrogate",
        "fanout targets",
        lambda o: o.fanout.enqueue(FanoutInput(1), targets=[LONE]),
        FanoutEnqueueError,
        "configured target IDs",
    ),
    Case(
        "a lone surrogate",
        "object name",
        lambda o: o.env.T.get_by_name(LONE),
        ValueError,
        "name must be valid UTF-8",
    ),
    Case("-1", "log commit offset", lambda o: o.log.commit("c", -1), LogAppendError, "offset"),
    Case("0", "log lease limit", lambda o: o.log.lease("c", 0), ValueError, "limit must"),
    Case("unknown batch", "log ack", lambda o: o.log.ack("c", "nope"), LogLeaseError, "not held"),
    Case(
        "bytes",
        "KV key",
        lambda o: o.ctx.storage.put(b"k", 1),
        JsException,
        "put() may only be called with a single key-value pair",
    ),
    Case(
        "a tuple",
        "KV value",
        lambda o: o.ctx.storage.put("k", (1,)),
        TypeError,
        "<class 'tuple'> cannot be sent over RPC.",
    ),
    Case(
        "a list 5,000 deep",
        "KV value",
        lambda o: o.ctx.storage.put("k", _nested(5_000)),
        TypeError,
        "256 levels deep",
    ),
    Case(
        "over 2,000,000 bytes",
        "KV value",
        lambda o: o.ctx.storage.put("k", "x" * 2_000_001),
        ValueError,
        "at most 2,000,000 bytes",
    ),
    Case("a str", "set_alarm", lambda o: o.ctx.storage.set_alarm("x"), TypeError, "scheduled_time"),
    Case(
        "BEGIN",
        "sql.exec",
        lambda o: o.ctx.storage.sql.exec("BEGIN"),
        JsException,
        "Error: To execute a transaction, please use the state.storage.transaction()",
    ),
    Case("a str", "purge_before", lambda o: o.ops.purge_before("x"), TypeError, "ms must"),
    Case(
        "no cutoff", "purge_before", lambda o: o.ops.purge_before(), TypeError, "needs the cutoff"
    ),
    Case(
        "ms and before=",
        "purge_before",
        lambda o: o.ops.purge_before(1, before=2),
        TypeError,
        "not both",
    ),
    Case(
        "a str before=",
        "purge_before",
        lambda o: o.ops.purge_before(before="x"),
        TypeError,
        "before must",
    ),
]
"""Bad inputs given to a live object's storage and helpers."""

AT_CONSTRUCTION = [
    Case("0", "RetryPolicy max_attempts", lambda _: RetryPolicy(max_attempts=0), ValueError, "max"),
    Case(
        "'3'",
        "RetryPolicy max_attempts",
        lambda _: RetryPolicy(max_attempts="3"),  # type: ignore[arg-type]
        TypeError,
        "max",
    ),
    Case(
        "100",
        "alarm_min_delay_ms",
        lambda ctx: DurabilityScheduler(context=ctx, alarm_min_delay_ms=100),
        ValueError,
        "between 1000 and 15000",
    ),
    Case(
        "2**31",
        "LogRetention max_bytes",
        lambda _: LogRetention(max_bytes=2**31),
        ValueError,
        "must not exceed",
    ),
    Case(
        "0",
        "LogLeaseOptions max_parallelism",
        lambda _: LogLeaseOptions(max_parallelism=0),
        ValueError,
        "positive integer",
    ),
    Case(
        "a lone surrogate",
        "operation name",
        lambda ctx: Durability(context=ctx, handlers={LONE: lambda call: None}),
        ValueError,
        "handler names must be valid UTF-8",
    ),
    Case(
        "a lone surrogate",
        "named-alarm name",
        lambda ctx: DurabilityAlarms(context=ctx, handlers={LONE: lambda info: None}),
        ValueError,
        "handler names must be valid UTF-8",
    ),
    Case(
        "a lone surrogate",
        "fanout target id",
        lambda ctx: DurabilityFanout(
            context=ctx, targets={LONE: FanoutTarget(deliver=lambda batch: None)}
        ),
        ValueError,
        "target ids must be valid UTF-8",
    ),
    Case("3", "Runtime path", lambda _: Runtime(path=3), TypeError, "path must"),  # type: ignore[arg-type]
    Case("0", "Runtime idle_evict_ms", lambda _: Runtime(idle_evict_ms=0), ValueError, "positive"),
    Case(
        "0",
        "Runtime max_live_objects",
        lambda _: Runtime(max_live_objects=0),
        ValueError,
        "positive",
    ),
    Case(
        "0",
        "Runtime max_open_databases",
        lambda _: Runtime(max_open_databases=0),
        ValueError,
        "positive",
    ),
]
"""Bad options, refused when the object holding them is built."""


class Target(DurableObject):
    """Operations, a named alarm and a log on one scheduler, and a way to try a case."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        scheduler = DurabilityScheduler(context=ctx)
        self.ops = Durability(scheduler=scheduler, handlers={"op": lambda call: None})
        self.alarms = DurabilityAlarms(scheduler=scheduler, handlers={"tick": lambda info: None})
        self.log: DurabilityLog[Any] = DurabilityLog(scheduler=scheduler, leases=LogLeaseOptions())
        self.fanout: DurabilityFanout[Any] = DurabilityFanout(
            scheduler=scheduler, targets={"t": FanoutTarget(deliver=lambda batch: None)}
        )

    async def attempt(self, table: str, index: int) -> list[Any]:
        """Make case `index` of `table`; `[error class, message, whether storage changed]`."""
        case = (IN_OBJECT if table == "object" else AT_CONSTRUCTION)[index]
        before = await self._fingerprint()
        try:
            made = case.call(self if table == "object" else self.ctx)
            if asyncio.iscoroutine(made):
                made = await made
        except Exception as error:
            return [type(error).__name__, str(error), await self._fingerprint() != before]
        changed = await self._fingerprint() != before
        if isinstance(made, EnqueueResult) and made.error is not None:
            return [made.error.name, made.error.message, changed]
        return ["(accepted)", "", changed]

    async def _fingerprint(self) -> list[Any]:
        """Every row of every table, and the alarm: what a refused call must not change."""
        sql = self.ctx.storage.sql
        tables = [
            row["name"] for row in sql.exec("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        rows = [
            [name, sorted(map(repr, sql.exec(f'SELECT * FROM "{name}"').raw()))] for name in tables
        ]
        return [rows, await self.ctx.storage.get_alarm()]


async def _try(table: str, index: int) -> list[Any]:
    async with Runtime(bindings={"T": Target}, clock=VirtualClock()) as runtime:
        stub = runtime.env.T.get_by_name("target")
        await stub.attempt("object", 0)  # The helpers' tables exist before the real try.
        answer: list[Any] = await stub.attempt(table, index)
        return answer


CASES = [("object", i) for i in range(len(IN_OBJECT))] + [
    ("construction", i) for i in range(len(AT_CONSTRUCTION))
]


@pytest.mark.parametrize(("table", "index"), CASES)
async def test_bad_input_gets_the_tabled_error_and_stores_nothing(table: str, index: int) -> None:
    """The input raises the error class of the table, naming the rule; nothing is stored."""
    case = (IN_OBJECT if table == "object" else AT_CONSTRUCTION)[index]
    error, message, changed = await _try(table, index)
    assert error == case.error.__name__, (case.what, case.where, message)
    assert case.says in message, (case.what, case.where, message)
    assert not changed, f"{case.what} at {case.where} changed storage"


def _print_table() -> None:
    print("| Input | Where | Error |\n|---|---|---|")
    for table, index in CASES:
        case = (IN_OBJECT if table == "object" else AT_CONSTRUCTION)[index]
        error, message, _ = asyncio.run(_try(table, index))
        print(f"| {case.what} | {case.where} | `{error}`: {message} |")


if __name__ == "__main__":
    _print_table()
