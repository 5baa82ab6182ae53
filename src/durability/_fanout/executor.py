"""`DeliveryExecutor`: how the engine's `AttemptRunner` runs a fanout's deliveries.

One attempt is one target's turn (its key is the target id, so a target never runs
two at once): a bounded batch of its due deliveries, claimed together (a lease: each
attempt is counted, and durable, before any consumer code runs) and handed to the
target as one batch, after the rows that only need their dead letter written. A
suspect (a delivery whose last claimed attempt never settled) is an attempt of its
own, run alone: delivered by itself, or dead-lettered once its interruptions while
alone reached the attempt limit; a suspect DLQ write is resumed alone, or dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._engine import Attempt, AttemptKind, hand_over
from .._errors import FanoutSettlementError
from .._load import RoutingLoad
from .dead_letters import DeadLetterWrites
from .delivery import Batch
from .rows import Delivery
from .settlement import INFRASTRUCTURE_RETRY_MS, Settler, failure_reason
from .store import DeliveryStore
from .types import FanoutTarget

if TYPE_CHECKING:
    from .._engine import Engine


class TargetWork:
    """What one attempt of a target does (an `Attempt`'s `data`): the rows whose dead
    letter it writes, the rows it claims and delivers, or one `suspect` alone."""

    __slots__ = ("claimed", "dead", "due", "failure", "resumed", "suspect")

    def __init__(
        self,
        due: list[Delivery] | None = None,
        dead: list[Delivery] | None = None,
        suspect: Delivery | None = None,
        failure: Exception | None = None,
    ) -> None:
        self.due = due or []
        self.dead = dead or []
        self.suspect = suspect
        self.failure = failure
        """Why the target's rows cannot run (a broken row, a failed read): the claim
        reports it."""
        self.claimed: list[Delivery] = []
        self.resumed = False
        """The suspect's DLQ write was claimed again, to run alone."""


class DeliveryExecutor:
    """Claims and runs the attempts of one fanout's targets (the `Executor` of their
    `AttemptKind`s)."""

    __slots__ = ("_dead", "_routing", "_settler", "_store", "_targets")

    def __init__(
        self,
        *,
        store: DeliveryStore,
        dead: DeadLetterWrites,
        settler: Settler,
        targets: Mapping[str, FanoutTarget[Any]],
        routing: RoutingLoad,
    ) -> None:
        self._store = store
        self._dead = dead
        self._settler = settler
        self._targets = targets
        self._routing = routing

    async def claim(
        self, engine: Engine, holds: list[Attempt], now: int, errors: list[Exception]
    ) -> set[str]:
        """Claim every held target's due rows in one transaction (each row leased until
        its target's attempt timeout from `now`); the targets with work to run."""
        first: TargetWork = holds[0].data
        if first.suspect is not None:
            return await self._claim_suspect(holds[0], now, errors)
        batches: list[tuple[TargetWork, list[Delivery], int, int]] = []
        for hold in holds:
            work: TargetWork = hold.data
            if work.failure is not None:
                errors.append(work.failure)
            elif work.due:
                policy = hold.kind.policy
                lease_until = now + policy.attempt_timeout_ms
                batches.append((work, work.due, policy.max_attempts, lease_until))
        if batches:
            try:
                claimed = await self._store.claim(
                    [batch[1:] for batch in batches], alone=holds[0].alone
                )
            except Exception as error:
                errors.append(error)
                return set()
            for (work, *_), rows in zip(batches, claimed, strict=True):
                work.claimed = rows
        return {hold.key for hold in holds if hold.data.claimed or hold.data.dead}

    async def _claim_suspect(self, attempt: Attempt, now: int, errors: list[Exception]) -> set[str]:
        """Claim the suspect row of the held `attempt` to run alone: its delivery
        (counting the interrupted one, spared if it ran beside others), or its DLQ write;
        a suspect out of attempts needs no claim (it is dead-lettered, or dropped)."""
        work: TargetWork = attempt.data
        row = work.suspect
        assert row is not None and row.claim_alone is not None
        policy = attempt.kind.policy
        try:
            if row.phase == "dead_letter":
                # Interruptions of DLQ writes run alone count, from when it was marked.
                interrupted = row.interruptions - row.spared + row.claim_alone
                if interrupted < policy.max_attempts:
                    work.resumed = await self._dead.resume(row, now + INFRASTRUCTURE_RETRY_MS)
                    return {attempt.key} if work.resumed else set()
                return {attempt.key}
            # Counted once claimed: the interrupted attempt is spared unless it ran alone.
            if row.counted + row.claim_alone > policy.max_attempts:
                return {attempt.key}
            claimed = await self._store.claim_suspect(row, now + policy.attempt_timeout_ms)
        except Exception as error:
            errors.append(error)
            return set()
        if claimed is None:
            return set()
        work.claimed = [claimed]
        return {attempt.key}

    async def lost(self, engine: Engine, attempt: Attempt) -> None:
        """Rows that changed since they were read are left to whoever changed them."""

    async def run(
        self,
        engine: Engine,
        claimed: list[Attempt],
        started_at: int,
        waiting: list[asyncio.Task[None]],
    ) -> None:
        """Run each claimed target's turn in a task of its own (targets run in
        parallel), which gives its hold back when the turn ends."""
        for hold in claimed:
            hand_over(engine, hold, self._turn(hold), waiting)

    async def _turn(self, attempt: Attempt) -> None:
        kind = attempt.kind
        work: TargetWork = attempt.data
        row = work.suspect
        if row is not None and not work.claimed:
            await self._settle_suspect(attempt, row)
            return
        for dead in work.dead:
            reason = failure_reason(dead.dead_letter_reason)
            await self._settler.dead_letter(dead, reason, alone=attempt.alone)
        if work.claimed:
            await self._deliver(kind, work.claimed)

    async def _settle_suspect(self, attempt: Attempt, row: Delivery) -> None:
        """A suspect that needed no delivery: its resumed DLQ write, a DLQ write dropped
        after its interruptions, or a delivery dead-lettered after its own."""
        work: TargetWork = attempt.data
        if work.resumed:
            reason = failure_reason(row.dead_letter_reason)
            await self._settler.dead_letter(row, reason, alone=True, resumed=True)
            return
        try:
            if row.phase != "dead_letter":
                exhausted = attempt.kind.exhausted_error
                assert exhausted is not None  # a target has an attempt limit
                error = exhausted(attempt, row.interruptions + 1)
                await self._settler.dead_letter(row, "interrupted", error, alone=True)
            else:
                await self._settler.drop_dead_letter(row, row.interruptions + 1)
        except FanoutSettlementError:
            # Settled without a claim (it is out of attempts), so another pass that read
            # the row too may have settled it first: the row is that pass's, as the row
            # of a lost claim is left to whoever changed it.
            return

    async def _deliver(self, kind: AttemptKind, claimed: list[Delivery]) -> None:
        """Hand the claimed rows, whose claims are durable, to the target as one batch."""
        batch = Batch(
            store=self._store,
            settler=self._settler,
            target=self._targets[kind.name],
            kind=kind,
            rows=claimed,
        )
        await batch.run(self._routing)
