"""The body of one claimed run: the workflow's code replayed against the journal
(`Run`), then how it ended written to the instance: complete, errored, paused, or
waiting until its next wake time."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._clock import now_ms
from .._context import SqlStorage
from .._errors import SerializedError, serialize_error
from .._serialization import deserialize, serialize
from . import journal, rows
from .api import WorkflowStep
from .engine import WorkflowEngine
from .errors import WorkflowError
from .rows import Fence, InstanceRow
from .run import Run
from .values import WorkflowEvent, workflow_event

WorkflowCode = Callable[[WorkflowEvent, WorkflowStep], Any]
"""A workflow's `run(event, step)` (its result may be awaitable)."""


@dataclass(frozen=True, slots=True)
class Ending:
    """How a run ended (`Run.until_end`), with its blockers as they were then."""

    how: str
    wake_at: int | None
    awaited: set[str]
    gated: bool
    pausing: bool


class RunBody:
    """Runs the workflows' code for claimed runs and writes how each ended."""

    def __init__(self, engine: WorkflowEngine, code: Mapping[str, WorkflowCode]) -> None:
        self.engine = engine
        self.code = dict(code)
        self.runs: dict[str, Run] = {}
        """The runs live here, by instance key."""

    async def run(self, row: InstanceRow, fence: Fence) -> bool:
        """Run the instance read as `row`, whose run `fence` is claimed, until it ends or
        suspends, and write how; raises a storage failure (the row then stays due).
        Whether the instance may still have work due (it suspended, or moved on under
        the run): the timer must then look at it again."""
        code = self.code.get(row.workflow)
        if code is None:
            gone = WorkflowError(f'this object has no workflow named "{row.workflow}"')
            return not await self._write(_errored(fence, serialize_error(gone)))
        engine = self.engine
        run = Run(
            fence,
            row.instance_id,
            journal.load_journal(engine.sql, row.key),
            engine.write,
            engine.statement,
            engine.sync,
        )
        run.pausing = row.state == "waitingForPause"
        event = workflow_event(
            deserialize(row.params), row.created_at, row.instance_id, row.workflow
        )
        self.runs[row.key] = run
        task = asyncio.ensure_future(self._complete(run, code, event))
        try:
            ending = await run.until_end(task)
            ended = Ending(ending, run.wake_at(), run.awaited_types(), run.gated(), run.pausing)
        finally:
            run.ended = True
            if self.runs.get(row.key) is run:
                del self.runs[row.key]
            await _stop([task, *run.cancel_tasks()])
        return await self._settle(run, ended, task)

    async def _complete(self, run: Run, code: WorkflowCode, event: WorkflowEvent) -> Any:
        """Run the code; once it returns, write the instance complete in the same turn,
        so the result of its last step commits with it (`run.completed`). An output that
        is not JSON, or a run ending otherwise, is left to `_settle`."""
        value = await _call(code, event, WorkflowStep(run))
        if run.stale or run.broken is not None or run.fatal is not None:
            return value
        try:
            output = serialize(value, "the output of the workflow's run")
        except (TypeError, ValueError):
            return value
        fence = run.fence
        try:
            run.completed = await self._write(
                lambda sql: rows.settle_complete(sql, fence, output, now_ms())
            )
        except Exception as error:
            run.broken = run.broken or error
        return value

    async def _settle(self, run: Run, ended: Ending, task: asyncio.Task[Any]) -> bool:
        """Write how the run ended (unless `_complete` did); whether the instance may
        still have work due."""
        fence = run.fence
        ending = ended.how
        if ending == "halted":
            if run.broken is not None:
                raise run.broken
            return True
        if ending == "fatal" and run.fatal is not None:
            return not await self._write(_errored(fence, run.fatal))
        if ending == "done":
            if run.completed:
                return False
            error = None if task.cancelled() else task.exception()
            if task.cancelled() or error is not None:
                failure = serialize_error(error or asyncio.CancelledError())
                return not await self._write(_errored(fence, failure))
            try:
                output = serialize(task.result(), "the output of the workflow's run")
            except (TypeError, ValueError) as not_json:
                return not await self._write(_errored(fence, serialize_error(not_json)))
            return not await self._write(
                lambda sql: rows.settle_complete(sql, fence, output, now_ms())
            )
        if ended.gated:
            return not await self._write(_errored(fence, serialize_error(run.divergence())))
        if ended.pausing:
            return not await self._write(lambda sql: rows.settle_paused(sql, fence, now_ms()))
        await self._suspend(fence, ended.wake_at, ended.awaited)
        return True

    async def _suspend(self, fence: Fence, planned: int | None, types: set[str]) -> None:

        def write(sql: SqlStorage) -> int | None:
            now = now_ms()
            wake = now if planned is None or journal.has_event(sql, fence.key, types) else planned
            return wake if rows.settle_waiting(sql, fence, max(wake, now), now) else None

        await self.engine.transaction(write, due_at=lambda wake: wake, timed=False)

    async def _write(self, write: Callable[[SqlStorage], bool]) -> bool:
        """`write` and the alarm's reconcile in one transaction; whether it wrote."""
        return await self.engine.transaction(write)


def _errored(fence: Fence, error: SerializedError) -> Callable[[SqlStorage], bool]:
    return lambda sql: rows.settle_errored(sql, fence, error, now_ms())


async def _call(code: WorkflowCode, event: WorkflowEvent, step: WorkflowStep) -> Any:
    result = code(event, step)
    if inspect.isawaitable(result):
        result = await result
    return result


async def _stop(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel `tasks` and wait for them to end (a cancellation of the caller is kept)."""
    going = [task for task in tasks if not task.done()]
    for task in going:
        task.cancel()
    if going:
        await asyncio.wait(going)
    for task in tasks:
        if not task.cancelled():
            task.exception()
