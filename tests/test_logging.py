"""Failures show in logs and keep their traceback: attempt logs, runtime alarm logs, stacks."""

from __future__ import annotations

import dataclasses
import logging
from types import SimpleNamespace
from typing import Any

import pytest

from _lab import open_lab
from _probe import Behaviour, Probe, sleeps
from conftest import START_MS, LiveObject
from durability import (
    Durability,
    DurabilityAlarms,
    DurabilityScheduler,
    DurableCall,
    NonRetryableError,
    RetryPolicy,
    SerializedError,
    now_ms,
)
from durability._errors import MAX_STACK_BYTES, serialize_error
from durability.runtime import AlarmInvocationInfo, DurableObject

ONE_MINUTE = 60_000


def _call_the_bank(error: type[Exception]) -> None:
    """The raise site a stored traceback must name."""
    raise error("card service down")


def bank_down(attempts: int, error: type[Exception] = RuntimeError) -> Behaviour:
    """A charge that fails (at `_call_the_bank`) for the first `attempts` attempts of a call."""

    def charge(call: DurableCall) -> str:
        if call.attempt <= attempts:
            _call_the_bank(error)
        return "charged"

    return charge


class Shop(DurableObject):
    """One operation and one named alarm on one scheduler; the probe's behaviours "charge"
    and "renew" say what their handlers do."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.probe: Probe = env["PROBE"]
        self.scheduler = DurabilityScheduler(context=ctx)
        self.durability = Durability(
            scheduler=self.scheduler,
            handlers={"charge": self._charge},
            retries=RetryPolicy(max_attempts=3, delay=lambda attempt: 1000),
            attempt_timeout_ms=5000,
        )
        self.alarms = DurabilityAlarms(
            scheduler=self.scheduler, handlers={"renew": self._renew}, attempt_timeout_ms=1000
        )

    async def _charge(self, call: DurableCall) -> str:
        return str(await self.probe.run("charge", call, "charged"))

    async def _renew(self, info: Any) -> None:
        await self.probe.run("renew", info)

    async def charge(self, id: str) -> None:
        await self.durability.charge(id=id)

    async def result(self, id: str) -> dict[str, Any]:
        result = await self.durability.charge.get_result(id)
        error = result.error
        return {
            "status": result.status,
            "error": None if error is None else dataclasses.asdict(error),
            "stack": None if error is None else error.stack,
        }

    async def renew_now(self) -> None:
        await self.alarms.renew(now_ms())

    async def query(self, statement: str, *args: Any) -> list[dict[str, Any]]:
        return self.ctx.storage.sql.exec(statement, *args).to_list()

    async def purge(self, before: int) -> int:
        return await self.durability.purge_before(before)

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.scheduler.alarm(info)


def _records(caplog: pytest.LogCaptureFixture, logger: str) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == logger]


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Capture every durability logger from DEBUG up."""
    caplog.set_level(logging.DEBUG, logger="durability")
    return caplog


async def test_a_retried_attempt_logs_a_warning_with_its_facts_and_traceback(
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    """A failed attempt with attempts left logs one WARNING naming the object, with traceback."""
    probe = Probe()
    probe.behaviour["charge"] = bank_down(1)
    async with open_lab("SHOP", Shop, probe) as lab:
        await lab.obj.charge("order-1")
        await lab.clock.run_until_idle()
        (warning,) = [r for r in _records(debug_logs, "durability.operations") if r.levelno > 10]
        assert warning.levelno == logging.WARNING
        assert warning.getMessage() == (
            f'operation "charge" id "order-1" attempt 1 of 3 failed on object "a" '
            f"({lab.obj.id}): RuntimeError: card service down; next attempt in 1000 ms"
        )
        facts = {key: getattr(warning, key) for key in _FACTS}
        assert facts == {
            "event": "durability.operation.attempt_failed",
            "entity_kind": "operation",
            "operation": "charge",
            "alarm": None,
            "record_id": "order-1",
            "attempt": 1,
            "max_attempts": 3,
            "object_id": str(lab.obj.id),
            "object_name": "a",
            "error_name": "RuntimeError",
            "error_message": "card service down",
            "retry_in_ms": 1000,
            "next_attempt_at": START_MS + 1000,
        }
        assert warning.exc_info is not None and warning.exc_info[1] is not None
        assert "_call_the_bank" in debug_logs.text and 'raise error("card service down")' in (
            debug_logs.text
        )


_FACTS = (
    "event",
    "entity_kind",
    "operation",
    "alarm",
    "record_id",
    "attempt",
    "max_attempts",
    "object_id",
    "object_name",
    "error_name",
    "error_message",
    "retry_in_ms",
    "next_attempt_at",
)


async def test_the_last_attempt_logs_an_error_and_successes_only_debug(
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    """At max_attempts the failure is an ERROR (attempts exhausted); a success is DEBUG only."""
    probe = Probe()
    probe.behaviour["charge"] = bank_down(3)
    async with open_lab("SHOP", Shop, probe) as lab:
        await lab.obj.charge("order-1")
        await lab.clock.advance(ONE_MINUTE)
        del probe.behaviour["charge"]
        await lab.obj.charge("order-2")
        await lab.clock.run_until_idle()
    records = _records(debug_logs, "durability.operations")
    levels = [(r.levelname, r.record_id, r.attempt) for r in records]  # type: ignore[attr-defined]
    assert levels == [
        ("WARNING", "order-1", 1),
        ("WARNING", "order-1", 2),
        ("ERROR", "order-1", 3),
        ("DEBUG", "order-2", 1),
    ]
    error, success = records[2], records[3]
    assert error.event == "durability.operation.failed"  # type: ignore[attr-defined]
    assert error.reason == "attempts_exhausted"  # type: ignore[attr-defined]
    assert "failed for good at attempt 3 of 3 (attempts exhausted)" in error.getMessage()
    assert error.exc_info is not None
    assert success.event == "durability.operation.completed"  # type: ignore[attr-defined]
    assert isinstance(success.duration_ms, int)  # type: ignore[attr-defined]


async def test_a_non_retryable_error_is_logged_as_terminal_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """NonRetryableError fails the record at its first attempt with one ERROR, reason given."""
    probe = Probe()
    probe.behaviour["charge"] = bank_down(1, NonRetryableError)
    async with open_lab("SHOP", Shop, probe) as lab:
        await lab.obj.charge("order-1")
        await lab.clock.run_until_idle()
    (record,) = _records(caplog, "durability.operations")
    assert (record.levelno, record.reason) == (logging.ERROR, "non_retryable")  # type: ignore[attr-defined]
    assert "(non retryable)" in record.getMessage()


async def test_a_named_alarm_timeout_is_an_error_on_the_alarms_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A timed-out named alarm (terminal by default) logs one ERROR on durability.alarms."""
    probe = Probe()
    probe.behaviour["renew"] = sleeps(10_000)
    async with open_lab("SHOP", Shop, probe) as lab:
        await lab.obj.renew_now()
        await lab.clock.advance(ONE_MINUTE)
    (record,) = _records(caplog, "durability.alarms")
    assert record.levelno == logging.ERROR
    assert record.getMessage().startswith(
        'named alarm "renew" failed for good at attempt 1 of 5 (terminal error) on object "a"'
    )
    facts = (record.alarm, record.operation, record.error_name, record.reason)  # type: ignore[attr-defined]
    assert facts == ("renew", None, "DurableAlarmTimeoutError", "terminal_error")


async def test_get_result_returns_the_stack_of_the_raise_site() -> None:
    """A failed operation's stored error carries its traceback; asdict and == are unchanged."""
    probe = Probe()
    probe.behaviour["charge"] = bank_down(1, NonRetryableError)
    async with open_lab("SHOP", Shop, probe) as lab:
        await lab.obj.charge("order-1")
        await lab.clock.run_until_idle()
        result = await lab.obj.result("order-1")
    assert result["error"] == {"name": "NonRetryableError", "message": "card service down"}
    stack = result["stack"]
    assert stack.startswith("Traceback (most recent call last):")
    assert "in _call_the_bank" in stack
    assert stack.endswith("NonRetryableError: card service down\n")


async def test_a_later_failure_without_a_traceback_forgets_the_old_one() -> None:
    """A timeout after a raised failure stores no stack: the old one is not shown with it."""
    probe = Probe()
    probe.behaviour["charge"] = bank_down(2)
    async with open_lab("SHOP", Shop, probe) as lab:
        await lab.obj.charge("order-1")
        await lab.clock.advance(1500)
        probe.behaviour["charge"] = probe.parked("bank")
        await lab.clock.advance(ONE_MINUTE)
        result = await lab.obj.result("order-1")
        stacks = await lab.obj.query("SELECT * FROM durability_error_stacks")
    assert result["error"]["name"] == "DurableAttemptTimeoutError"
    assert result["stack"] is None and stacks == []


async def test_rows_stored_without_a_stack_read_as_none() -> None:
    """A failed row written before stacks existed (no stack row) reads with stack None."""
    async with open_lab("SHOP", Shop, Probe()) as lab:
        await lab.obj.query(
            "INSERT INTO durability_calls (id, operation, payload, status, attempt, "
            "next_attempt_at, last_error, last_error_name, generation_id, created_at) "
            "VALUES ('old', 'charge', 'null', 'failed', 5, 0, 'boom', 'Error', 'g', 0)"
        )
        result = await lab.obj.result("old")
    assert result == {
        "status": "failed",
        "error": {"name": "Error", "message": "boom"},
        "stack": None,
    }


async def test_purge_drops_the_stacks_of_purged_records() -> None:
    """purge_before deletes the stored traceback with its record."""
    probe = Probe()
    probe.behaviour["charge"] = bank_down(1, NonRetryableError)
    async with open_lab("SHOP", Shop, probe) as lab:
        await lab.obj.charge("order-1")
        await lab.clock.run_until_idle()
        assert len(await lab.obj.query("SELECT * FROM durability_error_stacks")) == 1
        assert await lab.obj.purge(START_MS + 1) == 1
        assert await lab.obj.query("SELECT * FROM durability_error_stacks") == []


async def test_the_upstream_migration_lists_are_untouched() -> None:
    """Stacks live in their own capability: the operations history starts with the
    upstream three, and nothing of the stacks is among its migrations."""
    async with open_lab("SHOP", Shop, Probe()) as lab:
        rows = await lab.obj.query("SELECT capability, name FROM durability_migrations ORDER BY id")
    by_capability: dict[str, list[str]] = {}
    for row in rows:
        by_capability.setdefault(row["capability"], []).append(row["name"])
    assert by_capability["operations"][:3] == [
        "durability_0001_create_calls",
        "durability_0002_pending_index",
        "durability_0004_calls_generation_and_created_at",
    ]
    assert not any("stack" in name for name in by_capability["operations"])
    assert by_capability["errorStacks"] == ["durability_stacks_0001_create_error_stacks"]


def test_a_long_stack_keeps_its_end_within_8_kb() -> None:
    """A deep traceback is cut from the start to at most 8 KB and still ends at the raise."""

    def dive(depth: int) -> None:
        if depth == 0:
            raise ValueError("bottom")
        climb(depth - 1)

    def climb(depth: int) -> None:
        dive(depth)

    try:
        dive(200)
    except ValueError as error:
        stack = serialize_error(error).stack
    assert stack is not None
    assert len(stack.encode()) <= MAX_STACK_BYTES
    assert stack.startswith("[...]\n")
    assert 'raise ValueError("bottom")' in stack and stack.endswith("ValueError: bottom\n")


def test_an_error_never_raised_has_no_stack() -> None:
    """serialize_error of an error that was built but not raised (or a non-error) has stack None."""
    assert serialize_error(RuntimeError("built")).stack is None
    assert serialize_error("text").stack is None
    assert SerializedError("E", "m", "stack") == SerializedError("E", "m")
    assert repr(SerializedError("E", "m", "stack")) == "SerializedError(name='E', message='m')"


class Flaky(DurableObject):
    """An object whose alarm() always raises (or re-arms first when told to)."""

    async def arm(self, at_ms: int) -> None:
        await self.ctx.storage.set_alarm(at_ms)

    async def alarm(self) -> None:
        if self.env["PROBE"].rearm:
            await self.ctx.storage.set_alarm(now_ms() + ONE_MINUTE)
        _call_the_bank(RuntimeError)


async def test_runtime_alarm_retries_warn_and_the_drop_is_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each failed alarm() logs a WARNING naming the object; the last one, dropped, an ERROR."""
    probe = SimpleNamespace(rearm=False)
    async with open_lab("FLAKY", Flaky, probe) as lab:
        await lab.obj.arm(START_MS)
        await lab.clock.advance(3_600_000)
    records = _records(caplog, "durability.runtime")
    assert [(r.levelname, r.retry_count) for r in records] == [  # type: ignore[attr-defined]
        *(("WARNING", n) for n in range(6)),
        ("ERROR", 6),
    ]
    first, last = records[0], records[-1]
    object_id = first.object_id  # type: ignore[attr-defined]
    assert first.getMessage() == (
        f'alarm() of FLAKY "a" ({object_id}) failed (retry_count=0): '
        "RuntimeError: card service down; retry 1 in 2000 ms"
    )
    assert (first.event, first.object_name, first.retry_in_ms) == (  # type: ignore[attr-defined]
        "durability.runtime.alarm_retry",
        "a",
        2000,
    )
    assert last.event == "durability.runtime.alarm_dropped"  # type: ignore[attr-defined]
    assert last.getMessage().endswith("no retries left, the alarm is dropped")
    assert all(r.exc_info is not None for r in records)
    assert "in _call_the_bank" in caplog.text


async def test_a_failing_alarm_that_set_a_new_alarm_says_it_is_not_retried(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """alarm() raising after set_alarm() logs one WARNING saying the new alarm stands."""
    probe = SimpleNamespace(rearm=True)
    async with open_lab("FLAKY", Flaky, probe) as lab:
        await lab.obj.arm(START_MS)
        await lab.clock.run_until_idle()
    (record,) = _records(caplog, "durability.runtime")
    assert record.levelno == logging.WARNING
    assert record.event == "durability.runtime.alarm_replaced"  # type: ignore[attr-defined]
    assert record.getMessage().endswith("not retried: it set a new alarm during the call")


async def test_a_broken_retry_policy_is_a_terminal_error_with_its_reason(
    live: LiveObject, caplog: pytest.LogCaptureFixture
) -> None:
    """A policy returning a negative delay fails the record: one ERROR, reason retry_policy."""

    def charge(call: DurableCall) -> None:
        _call_the_bank(RuntimeError)

    durability = Durability(
        context=live.ctx,
        handlers={"charge": charge},
        retries=RetryPolicy(delay=lambda attempt: -1),
    )
    await durability.charge(id="order-1")
    await live.clock.run_until_idle()
    (record,) = _records(caplog, "durability.operations")
    assert (record.levelno, record.reason) == (logging.ERROR, "retry_policy")  # type: ignore[attr-defined]
    assert record.error_name == "DurableRetryPolicyError"  # type: ignore[attr-defined]
    assert (record.object_name, record.object_id) == ("live", str(live.ctx.id))  # type: ignore[attr-defined]
