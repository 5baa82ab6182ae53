"""The delivery passes of a fanout, through the engine's `AttemptRunner`.

A pass gives the runner one attempt per target with delivery rows (its key is the
target id: a target never runs two batches at once), in batches of the scheduler's
free permits: when a target's attempt takes its permit, it reads that target's due
rows (never-delivered first, by sequence) and the `DeliveryExecutor` claims and
delivers them. Rows whose last claimed attempt never settled (the process stopped or
the object was evicted while they were delivered) are suspects: once every target's
batch has run, each is run alone, holding every permit, so a message that takes its
process down takes no other with it, and only interruptions of attempts it ran alone
count toward its limit (see docs/reliability.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .._clock import now_ms
from .._engine import (
    ActiveExecution,
    Attempt,
    AttemptKind,
    AttemptPolicy,
    report_failure,
)
from .._errors import FanoutTimeoutError, SerializedError
from .engine import DELIVERIES, FanoutEngine, HostInfo
from .executor import DeliveryExecutor, TargetWork
from .rows import Delivery
from .settlement import INFRASTRUCTURE_RETRY_MS
from .store import DeliveryStore

MISSING_MANIFEST = "Fanout delivery is missing its message manifest"


class TargetRuns:
    """Runs the delivery passes of one fanout (`run_due` is its participant callback)."""

    __slots__ = ("_engine", "_kinds", "_max_batch_size", "_store", "_untaken")

    def __init__(
        self,
        *,
        engine: FanoutEngine,
        store: DeliveryStore,
        executor: DeliveryExecutor,
        policies: Mapping[str, AttemptPolicy],
        max_batch_size: int,
        emit: Callable[[Any], None],
        listened: frozenset[str],
    ) -> None:
        self._engine = engine
        self._store = store
        self._max_batch_size = max_batch_size
        self._kinds = {
            target: _kind(executor, target, policy, emit, listened)
            for target, policy in policies.items()
        }
        self._untaken = 0
        """Attempts given to the runner that wait for permits (not taken yet)."""

    def holding(self) -> bool:
        """True while a new pass would only wait: an attempt waits for a permit, or
        every configured target has an attempt in flight (one per target at a time).

        The end of the pass awaiting those attempts reconciles the timer again;
        meanwhile only the physical alarm counts the fanout's due rows, so permits held
        for long cost no pass per transaction.
        """
        if self._untaken:
            return True
        running = self._engine.running
        return all(target in running for target in self._kinds)

    async def run_due(self, now: int, info: HostInfo | None) -> None:
        """One pass: one bounded batch per target with delivery rows (targets in
        parallel), then the suspects found, each alone; a pass finding a target's
        attempt in flight waits for it instead. Raises the first storage failure."""
        running = self._engine.running
        attached: list[ActiveExecution] = []
        targets: list[str] = []
        failures: list[Exception] = []
        for target in self._store.target_ids():
            if target not in self._kinds:
                await self._postpone_missing(target, failures)
            elif target in running:
                attached.append(running[target])
            else:
                targets.append(target)
        suspects: list[Delivery] = []
        runner = self._engine.runner
        failures += await self._take(
            targets, lambda target: self._batch(target, suspects), runner.run
        )
        if suspects:
            failures += await self._take(suspects, self._suspect, runner.run_alone)
        for execution in attached:
            await execution.settled.wait()
        if failures:
            raise failures[0]

    async def _take(
        self,
        rows: list[Any],
        attempt_of: Callable[[Any], Attempt | None],
        run: Callable[..., Awaitable[list[tuple[str, Exception]]]],
    ) -> list[Exception]:
        """`run(rows, attempt_of)` on the runner, counting the rows it has not taken yet
        (`holding`); the storage failures it met."""
        self._untaken += len(rows)
        taken = 0

        def take(row: Any) -> Attempt | None:
            nonlocal taken
            taken += 1
            self._untaken -= 1
            return attempt_of(row)

        try:
            failures = await run(rows, take, table=DELIVERIES.name)
        finally:
            self._untaken -= len(rows) - taken
        return [error for _, error in failures]

    def _batch(self, target: str, suspects: list[Delivery]) -> Attempt | None:
        """`target`'s attempt, as its permit is taken: its due rows to claim and those to
        dead-letter (its suspects go to `suspects`); `None` when it has nothing to run."""
        if target in self._engine.running:
            return None
        kind = self._kinds[target]
        work = TargetWork()
        try:
            due = self._store.due(target, now_ms(), self._max_batch_size)
        except Exception as error:
            work.failure = error
            return Attempt(kind, target, "", 0, 0, work)
        max_attempts = kind.policy.max_attempts
        for row in due:
            if row.message_generation != row.generation:
                work.failure = RuntimeError(MISSING_MANIFEST)
                work.due, work.dead = [], []
                break
            if row.claim_alone is not None:
                suspects.append(row)
            elif row.phase == "dead_letter" or row.counted >= max_attempts:
                work.dead.append(row)
            else:
                work.due.append(row)
        if not (work.due or work.dead or work.failure):
            return None
        return Attempt(kind, target, "", 0, 0, work)

    def _suspect(self, row: Delivery) -> Attempt | None:
        """The attempt of suspect `row`, alone (none when its target runs here already)."""
        kind = self._kinds.get(row.target)
        if kind is None or row.target in self._engine.running:
            return None
        return Attempt(kind, row.target, "", 0, 0, TargetWork(suspect=row))

    async def _postpone_missing(self, target: str, failures: list[Exception]) -> None:
        """Keep the due rows of a target no longer configured, due again 60 s later."""
        now = now_ms()
        try:
            due = self._store.due(target, now, self._max_batch_size)
            if due:
                report_failure(
                    "durability.fanout.target_missing",
                    {"target": target},
                    RuntimeError(f'Target "{target}" is no longer configured; retaining work'),
                )
                await self._store.postpone(due, now + INFRASTRUCTURE_RETRY_MS)
        except Exception as error:
            failures.append(error)


def _kind(
    executor: DeliveryExecutor,
    target: str,
    policy: AttemptPolicy,
    emit: Callable[[Any], None],
    listened: frozenset[str],
) -> AttemptKind:
    """What every attempt of `target` shares."""
    return AttemptKind(
        executor=executor,
        table=DELIVERIES,
        label="fanout",
        entity_kind="fanout_delivery",
        name=target,
        policy=policy,
        emit=emit,
        exhausted_error=lambda attempt, interruptions: _exhausted(
            attempt, policy.max_attempts, interruptions
        ),
        timeout_error=lambda: FanoutTimeoutError(policy.attempt_timeout_ms),
        listened=listened,
    )


def _exhausted(attempt: Attempt, max_attempts: int, interruptions: int) -> SerializedError:
    """The error a suspect delivery out of attempts is dead-lettered with."""
    work: TargetWork = attempt.data
    row = work.suspect
    assert row is not None
    return SerializedError(
        "DurableAttemptsExhaustedError",
        f'Fanout message "{row.message_id}" to target "{row.target}" exhausted its '
        f"{max_attempts} attempts ({interruptions} interrupted: the process stopped or the "
        "object was evicted while it was delivered)",
    )
