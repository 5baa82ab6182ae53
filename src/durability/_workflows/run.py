"""One run of an instance: its workflow code replayed against the journal until it ends
or every path through it waits.

A step the journal holds as finished answers from the journal; a step it does not hold
runs. A path that must wait (a sleep not yet over, an event not yet sent, a retry not
yet due, a pause) blocks on a `Blocker`. When no step is running and the run has been
quiet for a few turns of the loop, the run suspends: its task is cancelled and its row
is made due at the earliest wake time of its blockers; the next run replays from the
journal. So a suspended instance holds no task and no permit.

Two rules keep a replay from misreading the journal (`WorkflowDeterminismError`): a
step name is used once per run, and a step the journal does not hold waits until the
run has asked for every step the journal does hold (the code changed otherwise).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from .._clock import now_ms
from .._context import SqlStorage
from .._errors import SerializedError, serialize_error
from .errors import WorkflowDeterminismError
from .journal import StepRow
from .rows import Fence, holds

SETTLE_TURNS = 8
"""Turns of the loop a run must stay unchanged, nothing running, before it suspends."""


class Blocker:
    """A path of the run waiting: for `wake_at`, for an event of `event_type`, for the
    journal to be replayed (`gate`), or for a resume (`pause`)."""

    __slots__ = ("event_type", "future", "kind", "timer", "wake_at")

    def __init__(self, kind: str, wake_at: int | None, event_type: str | None) -> None:
        self.kind = kind
        self.wake_at = wake_at
        self.event_type = event_type
        self.future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.timer: asyncio.TimerHandle | None = None

    def release(self) -> None:
        if not self.future.done():
            self.future.set_result(None)


class Run:
    """The state of one run: what it asked of the journal, what blocks, how it ended."""

    def __init__(
        self,
        fence: Fence,
        instance_id: str,
        journal: dict[tuple[str, str], StepRow],
        write: Callable[[Callable[[SqlStorage], Any]], Any],
        statement: Callable[[Callable[[SqlStorage], Any]], Any],
        sync: Callable[[], Awaitable[None]],
    ) -> None:
        self.fence = fence
        self.instance_id = instance_id
        self.journal = journal
        self._write = write
        self._statement = statement
        self.sync = sync
        self.unrequested = set(journal)
        self.last_seq = max((row.seq for row in journal.values()), default=0)
        """The highest `seq` of the instance's steps: a new step takes the next one."""
        self.requested: dict[tuple[str, str], object] = {}
        self.active = 0
        self.blockers: set[Blocker] = set()
        self.changed = asyncio.Event()
        self.changed.set()
        self.progress = 0
        self.fatal: SerializedError | None = None
        self.completed = False
        """The instance was written complete as the code returned (`RunBody._complete`)."""
        self.broken: BaseException | None = None
        """A storage failure: the run stops without settling; its row stays due."""
        self.stale = False
        """The instance moved on (terminated, restarted): the run stops, writing nothing."""
        self.pausing = False
        self.tasks: set[asyncio.Task[Any]] = set()
        """The tasks that ran steps of the run (but its own), cancelled when it ends."""
        self.ended = False
        """Set as the run's code is cancelled: a step asked for after that (in a `finally`
        of the code) is cancelled too, and writes nothing."""

    def adopt(self) -> None:
        """A step starts in the current task (the run's, one of `asyncio.gather`, or one
        the code made): cancel it too when the run ends."""
        task = asyncio.current_task()
        if task is not None and task not in self.tasks:
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    def cancel_tasks(self) -> list[asyncio.Task[Any]]:
        """Cancel the run's step tasks still going; them."""
        going = [task for task in self.tasks if not task.done()]
        for task in going:
            task.cancel()
        return going

    # -- what the step kinds call -------------------------------------------------------

    def bump(self) -> None:
        """Note progress: the run is not quiet. `until_end` need only look again when a
        path is blocked (no blocker, no suspension; every other ending sets `changed`
        itself), so a run of steps one after another does not wake it at each step."""
        self.progress += 1
        if self.blockers:
            self.changed.set()

    async def request(self, kind: str, name: str, owner: object) -> StepRow | None:
        """Claim step `(kind, name)` for this run; its journal row, if any.

        A name asked for twice in one run, by different steps, ends the instance."""
        if self.ended:
            raise asyncio.CancelledError
        key = (kind, name)
        if key in self.requested and self.requested[key] is not owner:
            label = "step" if kind == "do" else {"sleep": "sleep", "wait": "wait_for_event"}[kind]
            await self.fail(
                WorkflowDeterminismError(
                    f'{label} name "{name}" is used twice in one run of workflow instance '
                    f'"{self.instance_id}": each step needs a name of its own (a replay '
                    "answers steps by name)"
                )
            )
        self.requested[key] = owner
        self.bump()
        if key in self.unrequested:
            self.unrequested.discard(key)
            if not self.unrequested:
                self._release("gate")
        row = self.journal.get(key)
        if row is None and self.unrequested:
            await self.block("gate")
        return row

    async def commit(self, write: Callable[[SqlStorage], Any], *, single: bool = False) -> Any:
        """Run `write` atomically if this run still owns its instance, and return what it
        returned. Otherwise (the instance moved on, or storage failed) the run ends and
        the calling path never resumes. A `StepRaised` from `write` passes through.
        `single`: `write` makes at most one statement that writes, atomic by itself, so
        it needs no savepoint."""
        if self.ended:
            raise asyncio.CancelledError
        fence = self.fence

        def fenced(sql: SqlStorage) -> Any:
            if not holds(sql, fence):
                raise _Stale
            return write(sql)

        try:
            return (self._statement if single else self._write)(fenced)
        except _Stale:
            self.stale = True
        except StepRaised:
            raise
        except Exception as error:
            self.broken = self.broken or error
        await self.halt()

    async def durable(self) -> None:
        """Wait until the run's writes are durable (a storage failure ends the run)."""
        try:
            await self.sync()
        except Exception as error:
            self.broken = self.broken or error
            await self.halt()

    async def block(
        self, kind: str, wake_at: int | None = None, event_type: str | None = None
    ) -> None:
        """Wait until released: at `wake_at` (in this run, if it lasts), on an event of
        `event_type`, or by a gate or pause lifting."""
        blocker = Blocker(kind, wake_at, event_type)
        if wake_at is not None:
            delay = max(0, wake_at - now_ms())
            blocker.timer = asyncio.get_running_loop().call_later(delay / 1000, blocker.release)
        self.blockers.add(blocker)
        self.changed.set()
        try:
            await blocker.future
        finally:
            self.blockers.discard(blocker)
            if blocker.timer is not None:
                blocker.timer.cancel()
            self.bump()

    async def fail(self, error: BaseException) -> None:
        """End the instance as errored with `error` (a broken rule of replay, a result
        that is not JSON); the calling path never resumes."""
        if self.fatal is None:
            self.fatal = serialize_error(error)
        self.changed.set()
        await self.halt()

    async def halt(self) -> None:
        """Block the calling path for good: the run is ending."""
        self.changed.set()
        await asyncio.get_running_loop().create_future()

    def abort(self) -> None:
        """The instance moved on (terminated, restarted, its storage deleted): stop."""
        self.stale = True
        self.changed.set()

    def deliver(self, event_type: str) -> None:
        """An event of `event_type` arrived: wake the paths waiting for one."""
        for blocker in list(self.blockers):
            if blocker.event_type == event_type:
                blocker.release()

    def set_pausing(self, pausing: bool) -> None:
        """A pause was asked (new steps wait), or taken back (they go on)."""
        self.pausing = pausing
        if not pausing:
            self._release("pause")
        self.changed.set()

    def _release(self, kind: str) -> None:
        for blocker in list(self.blockers):
            if blocker.kind == kind:
                blocker.release()

    # -- how the run ends ---------------------------------------------------------------

    async def until_end(self, task: asyncio.Task[Any]) -> str:
        """Wait for the run's end: ``done`` (its code returned or raised), ``fatal``,
        ``halted`` (stale or broken) or ``suspended`` (quiet, every path blocked)."""
        task.add_done_callback(lambda _: self.changed.set())
        while True:
            await self.changed.wait()
            self.changed.clear()
            if self.stale or self.broken is not None:
                return "halted"
            if self.fatal is not None:
                return "fatal"
            if task.done():
                return "done"
            if self.active == 0 and self.blockers and await self._quiet(task):
                return "suspended"

    async def _quiet(self, task: asyncio.Task[Any]) -> bool:
        mark = self.progress
        for _ in range(SETTLE_TURNS):
            await asyncio.sleep(0)
            if (
                task.done()
                or self.fatal is not None
                or self.stale
                or self.broken is not None
                or self.progress != mark
                or self.active
                or not self.blockers
            ):
                return False
        return True

    def wake_at(self) -> int | None:
        """When a suspended run must run again: its earliest blocker's wake time."""
        times = [b.wake_at for b in self.blockers if b.wake_at is not None]
        return min(times) if times else None

    def awaited_types(self) -> set[str]:
        """The event types blocked paths wait for."""
        return {b.event_type for b in self.blockers if b.event_type is not None}

    def gated(self) -> bool:
        """Whether a new step waits for journal steps this run never reached."""
        return any(b.kind == "gate" for b in self.blockers)

    def divergence(self) -> WorkflowDeterminismError:
        """The error of a run that stopped short of steps its journal holds."""
        missing = ", ".join(f'{kind} "{name}"' for kind, name in sorted(self.unrequested))
        return WorkflowDeterminismError(
            f'workflow instance "{self.instance_id}" asked for new steps while its journal holds '
            f"steps this run never reached ({missing}): the workflow's code changed in a way "
            "a replay cannot follow"
        )


class _Stale(Exception):
    """The run's fence no longer holds."""


class StepRaised(Exception):
    """A synchronous step raised inside its transaction (rolled back): `error`."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error
