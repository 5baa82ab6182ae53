"""The fanout's public value types: inputs, targets, delivered and stored messages."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeAlias, TypeVar

from .._engine import RetryPolicy
from .._errors import SerializedError

Body = TypeVar("Body")

FailureReason: TypeAlias = Literal["exhausted", "explicit", "interrupted"]


@dataclass(frozen=True, slots=True)
class FanoutInput(Generic[Body]):
    """One message to enqueue.

    `id` defaults to a new random UUID; `deduplication_key` defaults to `id`. While a
    message with that key is retained, enqueueing the same work again is a no-op.
    """

    body: Body
    id: str | None = None
    deduplication_key: str | None = None


@dataclass(frozen=True, slots=True)
class StoredFailure:
    """Why a dead letter was written: `exhausted` attempts, an `explicit` dead_letter(),
    or `interrupted`: its attempts ran out by taking the process down (the process
    stopped or the object was evicted each time it was delivered alone).

    `error` is the last failure recorded (for `interrupted`, the count of interrupted
    deliveries), or `None` (an explicit dead letter on a first attempt has none).
    """

    reason: FailureReason
    error: SerializedError | None


@dataclass(frozen=True, slots=True)
class StoredMessage(Generic[Body]):
    """What a storage target or the dead-letter queue receives.

    `id` is the delivery identity (one per registration and target, stable across
    attempts): key writes by it and refuse to overwrite. Only dead letters carry
    `failure`. `to_json()` gives the stored shape with the upstream camelCase keys.
    """

    id: str
    message_id: str
    target: str
    body: Body
    enqueued_at: int
    stored_at: int
    attempts: int
    failure: StoredFailure | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON object form: `id`, `messageId`, `target`, `body`, `enqueuedAt`, ..."""
        data: dict[str, Any] = {
            "id": self.id,
            "messageId": self.message_id,
            "target": self.target,
            "body": self.body,
            "enqueuedAt": self.enqueued_at,
            "storedAt": self.stored_at,
            "attempts": self.attempts,
        }
        if self.failure is not None:
            error = self.failure.error
            data["failure"] = {
                "reason": self.failure.reason,
                "error": None if error is None else {"name": error.name, "message": error.message},
            }
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StoredMessage[Any]:
        """Read back what `to_json()` produced (for example, to redrive a dead letter)."""
        failure = data.get("failure")
        stored_failure = None
        if failure is not None:
            error = failure.get("error")
            stored_failure = StoredFailure(
                reason=failure["reason"],
                error=None if error is None else SerializedError(error["name"], error["message"]),
            )
        return cls(
            id=data["id"],
            message_id=data["messageId"],
            target=data["target"],
            body=data["body"],
            enqueued_at=data["enqueuedAt"],
            stored_at=data["storedAt"],
            attempts=data["attempts"],
            failure=stored_failure,
        )


MessageWrite: TypeAlias = Callable[[StoredMessage[Any]], Awaitable[None]]
"""`async write(message)`: a storage target or the dead-letter queue."""


class Settle(Protocol):
    """The settlement capability behind one delivered message."""

    async def ack(self) -> None: ...

    async def retry(self, delay_ms: int | None) -> None: ...

    async def dead_letter(self) -> None: ...


class FanoutMessage(Generic[Body]):
    """One message as a consumer target receives it, with its settlement methods.

    `id` is the message id, `delivery_id` the delivery identity, `attempt` the claimed
    attempt (1-based) and `enqueued_at` when the message was accepted. The first of
    `ack()`, `retry()` and `dead_letter()` to be called binds the outcome; a later
    call, or any call after the batch ended, raises `FanoutSettlementError`.
    """

    __slots__ = ("_settle", "attempt", "body", "delivery_id", "enqueued_at", "id", "target")

    def __init__(
        self,
        *,
        id: str,
        delivery_id: str,
        target: str,
        body: Body,
        attempt: int,
        enqueued_at: int,
        settle: Settle,
    ) -> None:
        self.id = id
        self.delivery_id = delivery_id
        self.target = target
        self.body = body
        self.attempt = attempt
        self.enqueued_at = enqueued_at
        self._settle = settle

    def __repr__(self) -> str:
        return f"FanoutMessage(id={self.id!r}, target={self.target!r}, attempt={self.attempt})"

    async def ack(self) -> None:
        """Settle as delivered: the delivery row is removed."""
        await self._settle.ack()

    async def retry(self, delay_ms: int | None = None) -> None:
        """Deliver again after `delay_ms` (default: the retry policy's delay).

        `retry(0)` is due at once but still after messages never delivered. An invalid
        `delay_ms` raises `ValueError` without binding an outcome.
        """
        await self._settle.retry(delay_ms)

    async def dead_letter(self) -> None:
        """Stop delivering: write a dead letter (reason `explicit`), or drop without a DLQ."""
        await self._settle.dead_letter()


@dataclass(frozen=True, kw_only=True, slots=True)
class FanoutTarget(Generic[Body]):
    """A named recipient: exactly one of `deliver` (a consumer) and `storage`.

    `deliver(messages)` gets each batch as a list of `FanoutMessage`; with
    `ack_on_return` every message it leaves unsettled is acked when it returns
    without raising. `storage(message)` is a `MessageWrite`: each message is acked
    once its write succeeds. `attempt_timeout_ms` and `retries` override the
    fanout's own.
    """

    deliver: Callable[[Sequence[FanoutMessage[Body]]], Any] | None = None
    storage: MessageWrite | None = None
    ack_on_return: bool = False
    attempt_timeout_ms: int | None = None
    retries: RetryPolicy | None = None
