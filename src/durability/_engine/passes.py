"""Engine passes: every participant's due work, run when the host alarm fires or the
early timer starts one (an engine pass is not an alarm: it is what the host alarm runs).

A pass that fails arms its own retry (the fallback alarm, `alarm_min_delay_ms` later)
and returns, so the host's limited retries are kept for when even that `set_alarm`
fails. A pass still running after `alarm_handoff_ms` re-arms the alarm and returns,
leaving its work running here: the next pass attaches to it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._clock import now_ms
from .._context import Transaction
from .._errors import serialize_error
from .lifecycle import logger, report_failure
from .options import AlarmRetryInfo
from .participants import HostAlarmInfo, Participant
from .tasks import BACKGROUND_FAILED

if TYPE_CHECKING:
    from .engine import Engine


class EnginePasses:
    """Runs the engine passes of one engine."""

    __slots__ = ("_engine",)

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def start_early(self, timestamp: int, wanted: Callable[[str], bool]) -> None:
        """The early timer's pass over the participants it serves, as instance work."""
        engine = self._engine
        participants = [p for p in engine.participants if wanted(p.table.name)]
        if not participants:
            return
        refusal = engine.tasks.try_spawn(self._early_pass(timestamp, participants))
        if refusal is not None:
            # The host refused new work: the instance is gone and the alarm takes over.
            logger.debug("early alarm at %s dropped: %s", timestamp, refusal)

    async def _early_pass(self, timestamp: int, participants: list[Participant]) -> None:
        try:
            await self.run(None, participants)
        except Exception as error:
            report_failure(BACKGROUND_FAILED, {"scheduled_time": timestamp}, error)

    async def run(self, info: HostAlarmInfo | None, participants: list[Participant]) -> None:
        """One pass over `participants` (a failure arms the fallback alarm; see the
        module docstring)."""
        engine = self._engine
        emptied = engine.emptied_count
        try:
            await self._run_pass(info, participants)
        except Exception as error:
            if engine.emptied_count != emptied or engine.recreated_if_emptied():
                # The pass failed on rows `delete_all()` removed: nothing of it is owed.
                await engine.schedule_next_alarm()
                return
            retry_in_ms = engine.options.alarm_min_delay_ms
            try:
                await engine.storage.set_alarm(now_ms() + retry_in_ms)
            except Exception as arm_error:
                # Only now does the pass's own error reach the host (whose retries are
                # limited); the failed fallback is why, so it is the cause.
                raise error from arm_error
            report_failure("durability.alarm.failed", {"retry_in_ms": retry_in_ms}, error)
            self._notify_alarm_retry(error, info)

    async def _run_pass(self, info: HostAlarmInfo | None, participants: list[Participant]) -> None:
        engine = self._engine
        started_at = now_ms()
        emptied = engine.emptied_count
        spawn = engine.tasks.spawn
        work = asyncio.gather(*(spawn(p.run_due(started_at, info)) for p in participants))
        work.add_done_callback(_consume_exception)
        remaining = engine.options.alarm_handoff_ms - (now_ms() - started_at)
        done, _ = await asyncio.wait({work}, timeout=max(remaining, 0) / 1000)
        if work not in done:
            if engine.emptied_count != emptied:
                # What still runs was on rows `delete_all()` removed: nothing to hand off.
                await engine.schedule_next_alarm()
                return
            # Hand off before the host's wall-time limit; the work keeps running here and
            # the next pass attaches to it through the running executions.
            await self._arm_for_handoff()
            return
        work.result()
        await engine.schedule_next_alarm()

    async def _arm_for_handoff(self) -> None:
        engine = self._engine

        async def arm(txn: Transaction) -> None:
            target = now_ms() + engine.options.alarm_min_delay_ms
            current = await txn.get_alarm()
            if current is None or current > target:
                await txn.set_alarm(target)

        await engine.storage.transaction(arm)

    def _notify_alarm_retry(self, failure: BaseException, info: HostAlarmInfo | None) -> None:
        engine = self._engine
        hook = engine.options.on_alarm_retry
        if hook is None:
            return
        retry_in_ms = engine.options.alarm_min_delay_ms
        details = {"retry_in_ms": retry_in_ms}
        retry = AlarmRetryInfo(
            error=serialize_error(failure),
            retry_in_ms=retry_in_ms,
            retry_count=None if info is None else getattr(info, "retry_count", None),
            is_retry=None if info is None else getattr(info, "is_retry", None),
            object_id=engine.object_id(),
        )
        try:
            outcome = hook(retry)
        except Exception as error:
            report_failure("durability.alarm.retry_hook_failed", details, error)
            return
        if inspect.isawaitable(outcome):
            engine.tasks.run_in_background(outcome, "durability.alarm.retry_hook_failed", details)


def _consume_exception(future: asyncio.Future[Any]) -> None:
    """Mark a background future's exception as seen (the pass reports it if it waits)."""
    if not future.cancelled():
        future.exception()
