"""The three kinds of step a run executes: `do` (a function, retried), `sleep`, `wait`.

Each asks the run for its journal row first (`Run.request`) and answers from it when
it can. A `do` attempt is written (and made durable) before the function runs, so an
attempt cut short by a crash still counts; its result is written before the step
returns. A plain (not async) function runs inside the transaction that writes its
result: what it writes to the object's SQLite commits together with the step, or not
at all.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable
from functools import partial
from typing import Any

from .._clock import now_ms
from .._context import SqlStorage
from .._errors import (
    DurableAttemptsExhaustedError,
    NonRetryableError,
    SerializedError,
    is_non_retryable,
    serialize_error,
)
from .._serialization import deserialize, serialize
from . import journal
from .durations import config_text, resolve_config, retry_delay_ms, retry_limit, timeout_ms
from .errors import WorkflowStepError, WorkflowTimeoutError
from .journal import StepRow
from .run import Run, StepRaised
from .values import AttrDict, decoded, received_event, step_context

StepCall = Callable[[Callable[[], AttrDict]], Any]
"""Calls the step's function for one attempt, given what makes the attempt's `ctx`
(called only for a function that takes one)."""


def stored_error(name: str, row: StepRow) -> Exception:
    """The error a failed step raises in `run`, the same on every replay."""
    error_name = row.error_name or "Error"
    message = row.error_message or ""
    if error_name == "NonRetryableError":
        return NonRetryableError(message)
    return WorkflowStepError(name, error_name, message)


def _remember(run: Run, kind: str, name: str, **fields: Any) -> StepRow:
    """Keep the run's copy of a journal row in step with what it just wrote."""
    row = run.journal.get((kind, name))
    if row is None:
        row = run.journal[(kind, name)] = StepRow(
            kind, name, 0, "", 0, None, None, None, None, None
        )
    for field, value in fields.items():
        setattr(row, field, value)
    return row


async def run_do(
    run: Run, name: str, config: object, call: StepCall, plain: bool, owner: object
) -> Any:
    """Run step `name` until it succeeds or fails for good; its value (a JSON copy)."""
    await run.request("do", name, owner)
    while True:
        row = run.journal.get(("do", name))
        now = now_ms()
        spared = 0
        if row is None:
            resolved = resolve_config(name, config)
            attempts = 0
        else:
            if row.status == "complete":
                return decoded(row.result or "")
            if row.status == "errored":
                raise stored_error(name, row)
            resolved = json.loads(row.detail or "{}")
            attempts, spared = row.attempt, row.spared
            if row.status == "retrying" and row.wake_at is not None and row.wake_at > now:
                await run.block("retry", row.wake_at)
                continue
            if row.status == "running" and attempts - spared > retry_limit(resolved):
                # Its last attempt was cut short, and counts: no retry is left.
                await _fail(run, name, "errored", _interrupted(name, resolved, row), None)
                raise stored_error(name, run.journal[("do", name)])
        if run.pausing:
            await run.block("pause")
            continue
        attempt = attempts + 1
        detail = config_text(resolved)
        await _begin(run, "do", name, "running", attempt, detail, None)
        run.active += 1
        try:
            await run.durable()
            ctx = partial(step_context, name, attempt, resolved)
            failure = await _attempt(run, name, call, ctx, plain, timeout_ms(resolved))
        finally:
            run.active -= 1
            run.bump()
        if failure is None:
            return decoded(run.journal[("do", name)].result or "")
        if is_non_retryable(failure):
            await _fail(run, name, "errored", serialize_error(failure), None)
            raise NonRetryableError(str(failure))
        if attempt - spared > retry_limit(resolved):
            await _fail(run, name, "errored", serialize_error(failure), None)
            raise stored_error(name, run.journal[("do", name)])
        wake = now_ms() + retry_delay_ms(resolved, attempt)
        await _fail(run, name, "retrying", serialize_error(failure), wake)


def _interrupted(name: str, config: dict[str, Any], row: StepRow) -> SerializedError:
    """The error of a step whose attempts ran out by being cut short (the process
    stopped or the object was evicted while it ran), counting those interruptions."""
    error = DurableAttemptsExhaustedError(
        "workflow step", name, retry_limit(config) + 1, row.interruptions
    )
    return serialize_error(error)


async def _attempt(
    run: Run,
    name: str,
    call: StepCall,
    ctx: Callable[[], AttrDict],
    plain: bool,
    limit_ms: int,
) -> Exception | None:
    """One attempt: call, store the result; the attempt's error, or `None` on success."""
    key = run.fence.key

    def store(sql: SqlStorage, value: Any) -> str:
        try:
            text = serialize(value, f'the result of step "{name}"')
        except (TypeError, ValueError) as error:
            raise StepRaised(_NotJson(error)) from None
        journal.complete(sql, key, "do", name, text, now_ms())
        return text

    try:
        if plain:

            def attempt(sql: SqlStorage) -> str:
                try:
                    value = call(ctx)
                except Exception as error:
                    raise StepRaised(error) from None
                if inspect.isawaitable(value):
                    _close(value)
                    raise StepRaised(
                        TypeError(
                            f'step "{name}" is a plain function that returned an '
                            "awaitable: declare it with async def"
                        )
                    )
                return store(sql, value)

            text = await run.commit(attempt)
        else:
            value = await _timed(call(ctx), limit_ms)
            text = await run.commit(lambda sql: store(sql, value), single=True)
    except StepRaised as raised:
        if isinstance(raised.error, _NotJson):
            await run.fail(raised.error.error)
        return raised.error
    except Exception as error:
        return error
    _remember(run, "do", name, status="complete", result=text, wake_at=None)
    return None


class _NotJson(Exception):
    """A step returned a value that cannot be stored: the instance fails."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _close(value: object) -> None:
    close = getattr(value, "close", None)
    if inspect.iscoroutine(value) and callable(close):
        close()


async def _timed(awaitable: Any, limit_ms: int) -> Any:
    """Await `awaitable` in this task, cancelled after `limit_ms` (then
    `WorkflowTimeoutError`). Its value comes back in the turn it was returned in, so the
    step's result is written in that same turn."""
    if not inspect.isawaitable(awaitable):
        return awaitable
    deadline = asyncio.timeout(limit_ms / 1000)
    try:
        async with deadline:
            return await awaitable
    except TimeoutError:
        if deadline.expired():
            raise WorkflowTimeoutError(limit_ms) from None
        raise


async def _begin(
    run: Run,
    kind: str,
    name: str,
    status: str,
    attempt: int,
    detail: str | None,
    wake_at: int | None,
) -> None:
    """Write that a step starts (or starts another attempt), and remember it."""
    key, now = run.fence.key, now_ms()
    found = run.journal.get((kind, name))
    step = (kind, name, run.last_seq + 1 if found is None else found.seq)
    await run.commit(
        lambda sql: journal.begin(sql, key, step, status, attempt, detail, wake_at, now),
        single=True,
    )
    if found is None:
        run.last_seq += 1
    _remember(
        run,
        kind,
        name,
        seq=step[2],
        status=status,
        attempt=attempt,
        detail=detail,
        wake_at=wake_at,
    )


async def _complete(run: Run, kind: str, name: str, result: str | None) -> None:
    """Write that a step is complete (with `result`, a stored envelope), and remember it."""
    key, now = run.fence.key, now_ms()
    await run.commit(lambda sql: journal.complete(sql, key, kind, name, result, now), single=True)
    _remember(run, kind, name, status="complete", result=result, wake_at=None)


async def _fail(
    run: Run,
    name: str,
    status: str,
    error: SerializedError,
    wake_at: int | None,
    kind: str = "do",
) -> None:
    """Write a step's failed attempt or final failure, and remember it."""
    key, now = run.fence.key, now_ms()
    await run.commit(
        lambda sql: journal.fail(sql, key, kind, name, status, error, wake_at, now), single=True
    )
    _remember(
        run,
        kind,
        name,
        status=status,
        error_name=error.name,
        error_message=error.message,
        wake_at=wake_at,
    )


async def run_sleep(run: Run, name: str, wake_first: Callable[[int], int]) -> None:
    """Sleep `name`: until the wake time its first run chose (`wake_first(now)`)."""
    await run.request("sleep", name, object())
    while True:
        row = run.journal.get(("sleep", name))
        now = now_ms()
        if row is None:
            if run.pausing:
                await run.block("pause")
                continue
            wake = wake_first(now)
            await _begin(run, "sleep", name, "sleeping", 0, str(wake - now), wake)
            continue
        if row.status == "complete":
            return
        if row.wake_at is not None and row.wake_at > now:
            await run.block("sleep", row.wake_at)
            continue
        await _complete(run, "sleep", name, None)
        return


async def run_wait(run: Run, name: str, event_type: str, limit_ms: int) -> AttrDict:
    """Wait `name` for an event of `event_type` (kept if it came early); at its deadline
    it raises `WorkflowTimeoutError`."""
    await run.request("wait", name, object())
    while True:
        row = run.journal.get(("wait", name))
        now = now_ms()
        if row is None:
            if run.pausing:
                await run.block("pause")
                continue
            await _begin(run, "wait", name, "waiting", 0, event_type, now + limit_ms)
            continue
        if row.status == "complete":
            return received_event(decoded(row.result or ""))
        if row.status == "timed_out":
            raise WorkflowTimeoutError(limit_ms)
        wanted = row.detail or event_type
        taken = await _take_event(run, name, wanted)
        if taken is not None:
            return received_event(decoded(taken))
        if row.wake_at is not None and row.wake_at <= now:
            error = WorkflowTimeoutError(limit_ms)
            await _fail(run, name, "timed_out", serialize_error(error), None, kind="wait")
            raise error
        await run.block("wait", row.wake_at, wanted)


async def _take_event(run: Run, name: str, event_type: str) -> str | None:
    """Take the oldest event of `event_type` kept for the instance as wait `name`'s
    result: the stored result, or `None` when there is none yet."""
    key, now = run.fence.key, now_ms()

    def take(sql: SqlStorage) -> str | None:
        found = journal.take_event(sql, key, event_type)
        if found is None:
            return None
        payload, sent_at = found
        text = serialize(
            {"type": event_type, "payload": deserialize(payload), "timestamp": sent_at}, "event"
        )
        journal.complete(sql, key, "wait", name, text, now)
        return text

    taken: str | None = await run.commit(take)
    if taken is not None:
        _remember(run, "wait", name, status="complete", result=taken, wake_at=None)
    return taken
