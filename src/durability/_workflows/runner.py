"""Running instances: the alarm pass's due instances, eager starts, one run's claim.

Every run is an attempt of the engine's `AttemptRunner`, of which `Runner` is the
executor: the runner holds the instance's key (from before its run waits for a permit
until its outcome is written) and its permit; `claim` counts the run with a fenced
write, durable before the workflow's code runs; `run` replays the code against the
journal in a task of its own (`RunBody`).

Poison isolation: a claimed run records whether it runs alone (holding every permit).
An instance whose last run never settled (the process stopped, or the object was
evicted, while it ran) is a suspect, run alone until one of its runs settles; the
interruption is charged to the steps that were running, spared if that run ran beside
others, so a step that takes its process down exhausts only its own retries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from .._context import SqlStorage
from .._engine import Attempt, AttemptKind, AttemptPolicy, hand_over, release
from .._types import MAX_SAFE_INTEGER
from . import rows
from .body import RunBody, WorkflowCode
from .claims import RUN_FAILED, Claimed, CreateClaims, NewInstance
from .engine import Engine, HostAlarmInfo, WorkflowEngine
from .run import Run
from .schema import INSTANCES

DUE_BATCH = 100
"""How many due instances one alarm pass reads and runs."""

RUNS = AttemptPolicy(
    attempt_timeout_ms=MAX_SAFE_INTEGER, max_attempts=MAX_SAFE_INTEGER, delay=lambda _: 0
)
"""The policy of runs: none of their own. A run has no timeout and no attempt limit (its
steps have theirs), and one that never settled is run again as soon as a pass finds
it."""

Start = tuple[str, str, str, int, int]
"""An instance to run now: workflow, key, generation, creation time and runs so far."""


class Runner:
    """Starts runs of this object's instances (the `Executor` of their attempts)."""

    def __init__(self, engine: WorkflowEngine, code: Mapping[str, WorkflowCode]) -> None:
        self.engine = engine
        self.body = RunBody(engine, code)
        self._kinds: dict[str, AttemptKind] = {}

    @property
    def runs(self) -> Mapping[str, Run]:
        """The runs live here, by instance key."""
        return self.body.runs

    async def run_due(self, now: int, info: HostAlarmInfo | None) -> None:
        """The alarm pass: run every due instance not already running here (those it
        waits for, unless live timers serve them), then each suspect alone; raise the
        first storage failure."""
        engine = self.engine
        running = engine.running
        attached = []
        due: list[rows.Due] = []
        suspects: list[rows.Due] = []
        for found in rows.due_instances(engine.sql, now, DUE_BATCH):
            held = running.get(found[0])
            if held is not None:
                if not engine.live_timers:
                    attached.append(held)
                continue
            (due if found[5] is None else suspects).append(found)
        runner = engine.runner
        failures = await runner.run(due, self._due_attempt, table=INSTANCES.name)
        if suspects:
            failures += await runner.run_alone(suspects, self._due_attempt, table=INSTANCES.name)
        for execution in attached:
            await execution.settled.wait()
        if failures:
            raise failures[0][1]

    def start(self, instances: list[Start]) -> None:
        """Run `instances` now in the background (each waits for a permit, in FIFO
        order), except those running here already."""
        if not instances:
            return
        attempts = [
            Attempt(self._kind(workflow), key, generation, created_at, runs, None)
            for workflow, key, generation, created_at, runs in instances
        ]
        # Each run's end reconciles the alarm (`_finish`): none is owed after them all.
        started = self.engine.runner.start(attempts, wait=True, reconcile=False)
        if started is not None:
            self.engine.in_background(started, RUN_FAILED, {"instance": attempts[0].key})

    def claims(self, workflow: str, new: list[NewInstance]) -> CreateClaims:
        """The first runs of new instances of `workflow` that a create's write claims, as
        far as permits are free now."""
        return CreateClaims(self.engine, self._kind(workflow), new)

    def _due_attempt(self, due: rows.Due) -> Attempt | None:
        """The attempt of due instance `due` as its permit is taken (none if it runs here)."""
        key, generation, created_at, runs, workflow, _ = due
        if key in self.engine.running:
            return None
        return Attempt(self._kind(workflow), key, generation, created_at, runs, None)

    def _kind(self, workflow: str) -> AttemptKind:
        """What every run of an instance of `workflow` shares (built once per name)."""
        found = self._kinds.get(workflow)
        if found is None:
            found = self._kinds[workflow] = AttemptKind(
                executor=self,
                table=INSTANCES,
                label=f'workflow "{workflow}"',
                entity_kind="workflow_instance",
                name=workflow,
                policy=RUNS,
                emit=self.engine.emitter(),
                listened=frozenset(),
            )
        return found

    # -- the executor of runs -----------------------------------------------------------

    async def claim(
        self, engine: Engine, holds: list[Attempt], now: int, errors: list[Exception]
    ) -> set[str]:
        """Claim the run of each held instance still due (one transaction for the lot);
        the keys claimed."""

        def write(sql: SqlStorage) -> set[str]:
            return {hold.key for hold in holds if _claim(sql, hold, now)}

        try:
            return self.engine.write(write)
        except Exception as error:
            errors.append(error)
            return set()

    async def lost(self, engine: Engine, attempt: Attempt) -> None:
        """An instance no longer due (or moved on) is left as it is."""

    async def run(
        self,
        engine: Engine,
        claimed: list[Attempt],
        started_at: int,
        waiting: list[asyncio.Task[None]],
    ) -> None:
        """Run each claimed instance in a task of its own, which gives its hold back once
        the run's outcome is written."""
        for hold in claimed:
            hand_over(engine, hold, self._execute(hold.data), waiting, self._finish)

    async def _execute(self, claimed: Claimed) -> None:
        row = claimed.row
        if claimed.created:
            row = rows.read_instance(self.engine.sql, row.key) or row
        claimed.owed = await self.body.run(row, claimed.fence)

    def _finish(self, engine: Engine, hold: Attempt) -> None:
        """Give the run's key and permit back; after a run that ended leaving work due,
        re-arm the timer for what it skipped meanwhile (a run cut short leaves that to
        the alarm; one that wrote its instance complete, errored or paused left none)."""
        release(engine, hold)
        claimed: Claimed = hold.data
        if claimed.owed:
            self.engine.refresh(hold.key)


def _claim(sql: SqlStorage, attempt: Attempt, now: int) -> bool:
    """Claim the run of the held `attempt`'s instance if it is still due (its `data` is
    then its `Claimed`); a suspect is claimed only alone."""
    row = rows.read_instance(sql, attempt.key)
    if (
        row is None
        or row.generation != attempt.generation
        or row.status != "pending"
        or row.next_attempt_at > now
    ):
        return False
    if row.claim_alone is None:
        fence = rows.claim_run(sql, row, now, attempt.alone)
    elif attempt.alone:
        fence = rows.claim_suspect(sql, row, now)
    else:
        return False  # a suspect runs alone: the next pass runs it
    if fence is None:
        return False
    attempt.data = Claimed(row, fence)
    return True
