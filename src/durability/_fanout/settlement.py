"""What happens to a claimed delivery: ack, retry, dead letter (or drop), and deadlines.

Each step is one fenced transaction on the row at its claimed attempt, so a step that
lost the row (it was reclaimed or settled meanwhile) raises `FanoutSettlementError`
and changes nothing. A dead letter persists its intent before the DLQ write: a crash
or a failed write then retries only the write, 60 s later, never the consumer.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

from .._clock import now_ms
from .._engine import (
    AttemptPolicy,
    DeliverySettledEvent,
    DeliveryTerminalEvent,
    LifecycleEventType,
    report_failure,
    retry_at,
)
from .._errors import (
    DurableRetryPolicyError,
    FanoutSettlementError,
    FanoutTimeoutError,
    SerializedError,
    serialize_error,
)
from .._serialization import deserialize
from .dead_letters import DeadLetterWrites
from .rows import Delivery
from .store import DeliveryStore
from .types import FailureReason, MessageWrite, StoredFailure, StoredMessage

T = TypeVar("T")

INFRASTRUCTURE_RETRY_MS = 60_000
"""How long a dead letter waits before its DLQ write is retried, and a missing target."""

EXPLICIT_DEAD_LETTER = SerializedError("DeadLetter", "Dead-lettered by consumer")


async def within(
    work: Awaitable[T], timeout_ms: int, expired: Callable[[], BaseException] | None = None
) -> T:
    """Await `work` for at most `timeout_ms`; past it, `expired()` is raised (by default
    `FanoutTimeoutError`)."""
    try:
        async with asyncio.timeout(timeout_ms / 1000) as deadline:
            return await work
    except TimeoutError:
        if deadline.expired():
            raise (FanoutTimeoutError(timeout_ms) if expired is None else expired()) from None
        raise


def failure_reason(stored: str | None) -> FailureReason:
    """A stored dead-letter reason as a `FailureReason` (none stored: `exhausted`)."""
    if stored == "explicit":
        return "explicit"
    if stored == "interrupted":
        return "interrupted"
    return "exhausted"


def entity(row: Delivery) -> dict[str, Any]:
    """The fields naming `row` in its lifecycle events."""
    return {"id": row.message_id, "target": row.target, "generation": row.generation}


class Settler:
    """Runs the settlement steps of one fanout and emits their lifecycle events."""

    __slots__ = ("_dead", "_dlq", "_emit", "_settled_heard", "_store", "_terminal_heard")

    def __init__(
        self,
        store: DeliveryStore,
        dead: DeadLetterWrites,
        dlq: MessageWrite | None,
        emit: Callable[[Any], None],
        listened: frozenset[str],
    ) -> None:
        """`listened`: the event types to build (the others are never built)."""
        self._store = store
        self._dead = dead
        self._dlq = dlq
        self._emit = emit
        self._settled_heard = LifecycleEventType.ATTEMPT_SETTLED in listened
        self._terminal_heard = LifecycleEventType.TERMINAL in listened

    def completed(self, row: Delivery, started_at: int) -> None:
        """Emit the `completed` event of a removed row."""
        if self._settled_heard:
            self._settled(row, started_at, "completed")

    def _settled(
        self,
        row: Delivery,
        started_at: int,
        outcome: Literal["completed", "retry_scheduled"],
        **extra: Any,
    ) -> None:
        """Emit the `DeliverySettledEvent` of `row`'s attempt, timed from `started_at`."""
        now = now_ms()
        self._emit(
            DeliverySettledEvent(
                **entity(row),
                timestamp=now,
                attempt=row.attempt,
                outcome=outcome,
                duration_ms=max(0, now - started_at),
                **extra,
            )
        )

    async def ack(self, row: Delivery, started_at: int) -> None:
        """Remove the claimed row; `FanoutSettlementError` if it is no longer this claim."""
        if not await self._store.remove([row]):
            raise FanoutSettlementError(row.id)
        self.completed(row, started_at)

    async def retry(
        self,
        row: Delivery,
        policy: AttemptPolicy,
        override: int | None,
        error: SerializedError,
        started_at: int,
    ) -> None:
        """Schedule another attempt, or dead-letter when attempts or the policy run out."""
        if row.counted >= policy.max_attempts:
            await self.dead_letter(row, "exhausted", error)
            return
        try:
            _, next_attempt_at = retry_at(policy, row.attempt, "fanout", override)
        except DurableRetryPolicyError as policy_error:
            await self.dead_letter(row, "exhausted", serialize_error(policy_error))
            return
        if not await self._store.settle_retry(row, next_attempt_at, error):
            raise FanoutSettlementError(row.id)
        if self._settled_heard:
            self._settled(
                row, started_at, "retry_scheduled", error=error, next_attempt_at=next_attempt_at
            )

    async def dead_letter(
        self,
        row: Delivery,
        reason: FailureReason,
        failure: SerializedError | None = None,
        *,
        alone: bool | None = None,
        resumed: bool = False,
    ) -> None:
        """Write `row` to the DLQ and remove it; without a DLQ, drop it at once.

        The DLQ write is claimed like an attempt (`alone`: holding every permit; by
        default as the row's own delivery was), and the claim is durable before the
        write, so a write that takes the process down is counted (`resumed`: the caller
        claimed it already, after such an interruption).
        """
        timestamp = row.dead_lettered_at if row.dead_lettered_at is not None else now_ms()
        error = failure
        if error is None and row.last_error is not None:
            error = SerializedError(row.last_error_name or "Error", row.last_error)
        dlq = self._dlq
        if dlq is None:
            # Nothing could ever accept it, and retrying would keep the object awake.
            await self.ack_terminal(row, reason, error)
            return
        if not resumed:
            marked = await self._dead.mark(
                row,
                reason=reason,
                timestamp=timestamp,
                retry_at=now_ms() + INFRASTRUCTURE_RETRY_MS,
                error=error,
                alone=bool(row.claim_alone) if alone is None else alone,
            )
            if not marked:
                raise FanoutSettlementError(row.id)
        await self._store.sync()
        stored: StoredMessage[Any] = StoredMessage(
            id=row.delivery_id,
            message_id=str(row.message_id),
            target=row.target,
            body=deserialize(str(row.payload)),
            enqueued_at=int(row.enqueued_at or 0),
            stored_at=timestamp,
            attempts=row.attempt,
            failure=StoredFailure(reason=reason, error=error),
        )
        try:
            await within(_call(dlq, stored), INFRASTRUCTURE_RETRY_MS)
            await self.ack_terminal(row, reason, error)
        except Exception as write_error:
            await self._dead.unclaim(row)
            report_failure(
                "durability.fanout.dead_letter_failed",
                {"id": row.message_id, "target": row.target},
                write_error,
            )

    async def drop_dead_letter(self, row: Delivery, interruptions: int) -> None:
        """Drop `row`, whose DLQ write took the process down every time it ran alone, up to
        the attempt limit: its message reaches no queue (said as a failure report)."""
        error = SerializedError(row.last_error_name or "Error", row.last_error or "")
        await self.ack_terminal(row, failure_reason(row.dead_letter_reason), error)
        report_failure(
            "durability.fanout.dead_letter_dropped",
            {"id": row.message_id, "target": row.target, "interruptions": interruptions},
            RuntimeError(
                f"the dead-letter write of this message was interrupted {interruptions} "
                "times (the process stopped or the object was evicted while it ran): "
                "the message is dropped"
            ),
        )

    async def ack_terminal(
        self, row: Delivery, reason: FailureReason, error: SerializedError | None
    ) -> None:
        """Remove a row that leaves the queue without success, and emit `terminal`."""
        if not await self._store.remove([row]):
            raise FanoutSettlementError(row.id)
        if self._terminal_heard:
            self._emit(
                DeliveryTerminalEvent(
                    **entity(row),
                    timestamp=now_ms(),
                    attempt=row.attempt,
                    reason="dead_lettered" if reason == "explicit" else "attempts_exhausted",
                    error=error or EXPLICIT_DEAD_LETTER,
                )
            )


async def _call(write: MessageWrite, message: StoredMessage[Any]) -> None:
    """Call a `MessageWrite` (its result may be a plain value or an awaitable)."""
    result: Any = write(message)
    if inspect.isawaitable(result):
        await result
