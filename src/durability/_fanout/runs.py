"""The delivery runs of a fanout: one bounded batch per target at a time, under the
scheduler's shared permits, and every delivery whose last attempt never settled run
alone.

A target's run reads its due rows. Rows in the dead-letter phase, or out of attempts,
go to the dead-letter queue; the others are claimed together (a lease: the attempt is
counted and durable before any consumer code runs) and delivered as one batch. A row
whose claimed attempt never settled (the process stopped or the object was evicted
while it was delivered) is a suspect: it is claimed and delivered by itself, holding
every permit, so a message that takes its process down takes no other with it, and
only interruptions of attempts it ran alone count toward its limit (see
docs/reliability.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from .._clock import now_ms
from .._engine import AttemptPolicy, LifecycleEventType, report_failure
from .._errors import SerializedError
from .._load import RoutingLoad
from .dead_letters import DeadLetterWrites
from .delivery import Batch
from .engine import FanoutEngine, HostInfo, Release
from .rows import Delivery
from .settlement import INFRASTRUCTURE_RETRY_MS, Settler, failure_reason
from .store import DeliveryStore
from .types import FailureReason, FanoutTarget


class TargetRuns:
    """Runs the delivery passes of one fanout (`run_due` is its participant callback)."""

    __slots__ = (
        "_dead",
        "_emit",
        "_engine",
        "_listened",
        "_max_batch_size",
        "_policies",
        "_routing",
        "_running",
        "_settler",
        "_store",
        "_targets",
    )

    def __init__(
        self,
        *,
        engine: FanoutEngine,
        store: DeliveryStore,
        dead: DeadLetterWrites,
        settler: Settler,
        targets: Mapping[str, FanoutTarget[Any]],
        policies: Mapping[str, AttemptPolicy],
        max_batch_size: int,
        routing: RoutingLoad,
        emit: Callable[[Any], None],
        listened: frozenset[str],
    ) -> None:
        self._engine = engine
        self._store = store
        self._dead = dead
        self._settler = settler
        self._targets = targets
        self._policies = policies
        self._max_batch_size = max_batch_size
        self._routing = routing
        self._emit = emit
        self._listened = listened
        self._running: dict[str, asyncio.Future[None]] = {}

    def holding(self) -> bool:
        """True while a new pass would only wait: a target run waits for a permit, or
        every configured target has a run in flight (one run per target at a time).

        The end of the pass awaiting those runs reconciles the timer again; meanwhile
        only the physical alarm counts the fanout's due rows, so permits held for long
        cost no pass per transaction.
        """
        if self._engine.waiting:
            return True
        running = self._running
        return all(target in running and not running[target].done() for target in self._targets)

    async def run_due(self, now: int, info: HostInfo | None) -> None:
        """One pass: one bounded batch per target with delivery rows, targets in parallel."""
        outcomes = await asyncio.gather(
            *(self._target_pass(target) for target in self._store.target_ids()),
            return_exceptions=True,
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome

    def _target_pass(self, target: str) -> asyncio.Future[None]:
        """The running pass of `target`, or a new one (one per target at a time)."""
        running = self._running.get(target)
        if running is None or running.done():
            running = self._engine.spawn(self._run_target(target))
            self._running[target] = running
            running.add_done_callback(lambda done: self._forget(target, done))
        return asyncio.shield(running)

    def _forget(self, target: str, done: asyncio.Future[None]) -> None:
        if self._running.get(target) is done:
            del self._running[target]

    async def _run_target(self, target_id: str) -> None:
        release = await self._engine.acquire_permit()
        suspects: list[Delivery] = []
        try:
            now = now_ms()
            due = self._store.due(target_id, now, self._max_batch_size)
            target = self._targets.get(target_id)
            policy = self._policies.get(target_id)
            if target is None or policy is None:
                if due:
                    report_failure(
                        "durability.fanout.target_missing",
                        {"target": target_id},
                        RuntimeError(
                            f'Target "{target_id}" is no longer configured; retaining work'
                        ),
                    )
                    await self._store.postpone(due, now + INFRASTRUCTURE_RETRY_MS)
                return
            claimable: list[Delivery] = []
            for row in due:
                if row.message_generation != row.generation:
                    raise RuntimeError("Fanout delivery is missing its message manifest")
                if row.claim_alone is not None:
                    suspects.append(row)
                elif row.phase == "dead_letter" or row.counted >= policy.max_attempts:
                    await self._settler.dead_letter(
                        row, _reason(row), alone=self._engine.permits_size == 1
                    )
                else:
                    claimable.append(row)
            if claimable:
                alone = self._engine.permits_size == 1
                claimed = await self._store.claim(
                    claimable, policy.max_attempts, now_ms() + policy.attempt_timeout_ms, alone
                )
                await self._deliver(target, policy, claimed)
        finally:
            release()
        for row in suspects:
            await self._run_alone(target_id, row)

    async def _run_alone(self, target_id: str, row: Delivery) -> None:
        """Deliver suspect `row` by itself, holding every permit; out of attempts (its
        interruptions while alone reached the limit), it is dead-lettered instead."""
        release = await self._engine.acquire_all_permits()
        try:
            target = self._targets.get(target_id)
            policy = self._policies.get(target_id)
            if target is None or policy is None:
                return  # the next run reports and postpones it
            assert row.claim_alone is not None
            if row.phase == "dead_letter":
                await self._resume_dead_letter(row, policy)
                return
            # The attempts counted once this one is claimed: the interrupted one is spared
            # unless it ran alone.
            counted = row.counted + row.claim_alone
            if counted > policy.max_attempts:
                await self._settler.dead_letter(
                    row, "interrupted", _interrupted(row, policy.max_attempts), alone=True
                )
                return
            claimed = await self._store.claim_suspect(row, now_ms() + policy.attempt_timeout_ms)
            if claimed is not None:
                await self._deliver(target, policy, [claimed])
        finally:
            release()

    async def _resume_dead_letter(self, row: Delivery, policy: AttemptPolicy) -> None:
        """Write to the DLQ, alone, a row whose DLQ write an interruption cut off; once such
        interruptions of writes run alone reach the attempt limit, drop it."""
        assert row.claim_alone is not None
        interrupted = row.interruptions - row.spared + row.claim_alone
        if interrupted >= policy.max_attempts:
            await self._settler.drop_dead_letter(row, row.interruptions + 1)
        elif await self._dead.resume(row, now_ms() + INFRASTRUCTURE_RETRY_MS):
            await self._settler.dead_letter(row, _reason(row), alone=True, resumed=True)

    async def _deliver(
        self, target: FanoutTarget[Any], policy: AttemptPolicy, claimed: list[Delivery]
    ) -> None:
        """Deliver the claimed rows as one batch, once their claims are durable."""
        if not claimed:
            return
        # The counted attempt and its lease are durable before any consumer code runs: a
        # process killed inside deliver() leaves each row claimed, so it runs alone next.
        await self._engine.sync()
        batch = Batch(
            store=self._store, settler=self._settler, target=target, policy=policy, rows=claimed
        )
        started_heard = LifecycleEventType.ATTEMPT_STARTED in self._listened
        await batch.run(self._routing, self._emit if started_heard else None)


def _reason(row: Delivery) -> FailureReason:
    """Why `row` is dead-lettered (its stored reason; one out of attempts: exhausted)."""
    return failure_reason(row.dead_letter_reason)


def _interrupted(row: Delivery, max_attempts: int) -> SerializedError:
    """The error a delivery dead-lettered for its interruptions is stored with."""
    count = row.interruptions + 1
    return SerializedError(
        "DurableAttemptsExhaustedError",
        f'Fanout message "{row.message_id}" to target "{row.target}" exhausted its '
        f"{max_attempts} attempts ({count} interrupted: the process stopped or the object "
        "was evicted while it was delivered)",
    )


__all__ = ["Release", "TargetRuns"]
