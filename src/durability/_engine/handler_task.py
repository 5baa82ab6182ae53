"""The rest of an attempt whose handler returned an awaitable: awaited in a task of its
own, under the attempt timeout, then settled.

A timed-out handler is aborted and cancelled, but its permit and key lock are held until
its task really ends, so a retry in this instance can never overlap it. The outcome is
persisted as soon as it is known (a timeout does not wait for the task to end).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from .._signal import AbortSignal, abort
from .attempt import Attempt
from .settle import record_success, settle_error

if TYPE_CHECKING:
    from .engine import Engine
    from .records import RecordExecutor


class _Gate:
    """Releases the permit and the key lock once the outcome is persisted AND the handler ended."""

    __slots__ = ("attempt", "engine", "handler", "outcome", "persisted", "released")

    def __init__(self, engine: Engine, attempt: Attempt) -> None:
        self.engine = engine
        self.attempt = attempt
        self.handler: asyncio.Task[None] | None = None
        self.outcome: asyncio.Future[_Outcome] = asyncio.get_running_loop().create_future()
        self.persisted = False
        self.released = False

    def handler_done(self, task: asyncio.Task[None]) -> None:
        # A handler task that ended without reporting (cancelled before it ran) still
        # wakes its execution.
        if not self.outcome.done():
            error = None if task.cancelled() else task.exception()
            _deliver(self.outcome, _Outcome(error=error or asyncio.CancelledError()))
        # Released only now, after its outcome was persisted (a timed-out handler that
        # took a while to end): the reconciles since skipped its key, so time it again.
        self.release_if_settled(refresh=True)

    def execution_done(self) -> None:
        self.persisted = True
        self.release_if_settled(refresh=self.engine.options.live_timers)

    def release_if_settled(self, refresh: bool) -> None:
        if self.released or not self.persisted:
            return
        if self.handler is not None and not self.handler.done():
            return
        self.released = True
        engine, attempt = self.engine, self.attempt
        attempt.permit()
        table = attempt.kind.table.name
        engine.running.finish(table, attempt.key, attempt)
        if refresh:
            # The key is eligible for the timer again: re-arm it for work it skipped.
            engine.refresh_in_background(
                "durability.scheduler.refresh_failed", {"table": table, "key": attempt.key}
            )


async def continue_in_task(
    engine: Engine, attempt: Attempt, number: int, started_at: int, called: Awaitable[Any]
) -> None:
    """Await `called`, what the handler of attempt `number` returned, in a task of its own
    (timed, cancellable), settle the outcome, then release the permit and key lock the
    attempt holds.

    `attempt.signal` is the signal the handler was called with. Raises only for storage
    failures.
    """
    gate = _Gate(engine, attempt)
    try:
        signal = attempt.signal
        assert signal is not None
        ended = await _run(engine, attempt, gate, signal, called)
        if ended.error is not None:
            await settle_error(engine, attempt, number, started_at, ended.error)
            return
        try:
            executor: RecordExecutor = attempt.kind.executor  # type: ignore[assignment]
            completed_at = executor.complete(engine, [(attempt, number, ended.value)])[0]
        except Exception as error:
            completed_at = error
        if isinstance(completed_at, Exception):
            await settle_error(engine, attempt, number, started_at, completed_at)
            return
        record_success(engine, attempt, number, started_at, completed_at, ended.value)
    finally:
        gate.execution_done()


async def _run(
    engine: Engine, attempt: Attempt, gate: _Gate, signal: AbortSignal, called: Awaitable[Any]
) -> _Outcome:
    """Await the handler in its own task until it ends or times out (then it is aborted)."""
    kind = attempt.kind
    handler = engine.tasks.spawn(_await(called, kind.policy.attempt_timeout_ms, gate.outcome))
    gate.handler = handler
    handler.add_done_callback(gate.handler_done)
    try:
        ended = await gate.outcome
    except asyncio.CancelledError:
        handler.cancel()
        raise
    if ended is not _TIMED_OUT:
        return ended
    assert kind.timeout_error is not None  # a record's attempt always has a timeout
    timeout_error = kind.timeout_error()
    abort(signal, timeout_error)
    handler.cancel()
    return _Outcome(error=timeout_error)


class _Outcome:
    """How a handler call ended; a raise is captured so the host never logs it as lost."""

    __slots__ = ("error", "value")

    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self.value = value
        self.error = error


_TIMED_OUT = _Outcome()
"""The outcome the attempt timer delivers when it fires first."""


async def _await(
    called: Awaitable[Any], timeout_ms: int, outcome: asyncio.Future[_Outcome]
) -> None:
    """Await what the handler returned and hand its outcome straight to the execution;
    the attempt timer runs from here."""
    timer = asyncio.get_running_loop().call_later(timeout_ms / 1000, _expire, outcome)
    try:
        value = await called
    except asyncio.CancelledError:
        _deliver(outcome, _Outcome(error=asyncio.CancelledError()))
        raise
    except Exception as error:
        _deliver(outcome, _Outcome(error=error))
    else:
        _deliver(outcome, _Outcome(value))
    finally:
        timer.cancel()


def _deliver(outcome: asyncio.Future[_Outcome], ended: _Outcome) -> None:
    if not outcome.done():
        outcome.set_result(ended)


def _expire(outcome: asyncio.Future[_Outcome]) -> None:
    _deliver(outcome, _TIMED_OUT)
