"""Delivering one claimed batch to one target, and the settlement of each message.

The batch runs under the target's attempt timeout. When the target returns or raises,
every message is closed (later settlement calls raise), `ack_on_return` acks what the
consumer left unsettled in one transaction, and the settlements already started are
awaited even if the consumer raised. Whatever is still unsettled then is retried
with the batch's failure.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from .._clock import now_ms
from .._engine import AttemptKind, DeliveryStartedEvent, LifecycleEventType
from .._errors import FanoutSettlementError, SerializedError, serialize_error
from .._load import RoutingLoad
from .._serialization import deserialize
from .._types import MAX_SAFE_INTEGER
from .rows import Delivery
from .settlement import Settler, entity, within
from .store import DeliveryStore
from .types import FanoutMessage, FanoutTarget, MessageWrite, StoredMessage

UNSETTLED = SerializedError("Error", "Consumer returned without settling the message")
RETRIED = SerializedError("Retry", "Retried by consumer")


class _Settlement:
    """The settlement state of one message of a batch (the `Settle` behind its methods)."""

    __slots__ = ("_batch", "closed", "completed", "outcome", "row", "task")

    def __init__(self, batch: Batch, row: Delivery) -> None:
        self._batch = batch
        self.row = row
        self.closed = False
        self.outcome: str | None = None
        self.task: asyncio.Future[None] | None = None
        self.completed = False

    async def ack(self) -> None:
        batch = self._batch
        await self._bind("ack", lambda: batch.settler.ack(self.row, batch.started_at))

    async def retry(self, delay_ms: int | None) -> None:
        if delay_ms is not None and not _valid_delay(delay_ms):
            raise ValueError("delay_ms must produce a non-negative safe-integer timestamp")
        batch = self._batch
        await self._bind(
            "retry",
            lambda: batch.settler.retry(
                self.row, batch.policy, delay_ms, RETRIED, batch.started_at
            ),
        )

    async def dead_letter(self) -> None:
        await self._bind(
            "dead_letter", lambda: self._batch.settler.dead_letter(self.row, "explicit")
        )

    async def _bind(self, outcome: str, action: Callable[[], Awaitable[None]]) -> None:
        if self.closed or self.outcome is not None:
            raise FanoutSettlementError(str(self.row.message_id), self.outcome)
        self.outcome = outcome
        # Run in the caller's task: settlements awaited one after another then share
        # the caller's turn, and so one commit. `task` lets the batch wait for it.
        finished = asyncio.get_running_loop().create_future()
        finished.add_done_callback(_retrieve)
        self.task = finished
        try:
            await action()
        except asyncio.CancelledError:
            finished.cancel()
            raise
        except Exception as error:
            finished.set_exception(error)
            raise
        self.completed = True
        finished.set_result(None)


def _retrieve(future: asyncio.Future[None]) -> None:
    """Mark a settlement's failure as seen: the caller got it, the batch may read it."""
    if not future.cancelled():
        future.exception()


def _valid_delay(delay_ms: object) -> bool:
    if isinstance(delay_ms, bool) or not isinstance(delay_ms, int):
        return False
    return delay_ms >= 0 and now_ms() + delay_ms <= MAX_SAFE_INTEGER


class Batch:
    """One claimed batch of one target, from hand-over to the last retry it schedules."""

    __slots__ = ("kind", "policy", "settler", "started_at", "states", "store", "target")

    def __init__(
        self,
        *,
        store: DeliveryStore,
        settler: Settler,
        target: FanoutTarget[Any],
        kind: AttemptKind,
        rows: list[Delivery],
    ) -> None:
        self.store = store
        self.settler = settler
        self.target = target
        self.kind = kind
        self.policy = kind.policy
        self.started_at = now_ms()
        self.states = [_Settlement(self, row) for row in rows]

    async def run(self, routing: RoutingLoad) -> None:
        """Deliver the batch, then retry every message that did not settle."""
        finish = routing.begin("outbound")
        messages = self._messages()
        kind = self.kind
        if LifecycleEventType.ATTEMPT_STARTED in kind.listened:
            for state in self.states:
                kind.emit(
                    DeliveryStartedEvent(
                        **entity(state.row), timestamp=self.started_at, attempt=state.row.attempt
                    )
                )
        failure: SerializedError = UNSETTLED
        try:
            timeout_ms = self.policy.attempt_timeout_ms
            await within(self._invoke(messages), timeout_ms, kind.timeout_error)
        except Exception as error:
            failure = serialize_error(error)
        finally:
            self._close()
            finish()
        for state in self.states:
            if not state.completed and self._needs_retry(state):
                state.outcome = "retry"
                await self.settler.retry(state.row, self.policy, None, failure, self.started_at)

    def _messages(self) -> list[FanoutMessage[Any]]:
        """The batch's messages as the consumer gets them, each body decoded on its own
        (a consumer may change what it receives)."""
        return [
            FanoutMessage(
                id=str(row.message_id),
                delivery_id=row.delivery_id,
                target=row.target,
                body=deserialize(str(row.payload)),
                attempt=row.attempt,
                enqueued_at=int(row.enqueued_at or 0),
                settle=state,
            )
            for state in self.states
            for row in (state.row,)
        ]

    def _close(self) -> None:
        for state in self.states:
            state.closed = True

    def _needs_retry(self, state: _Settlement) -> bool:
        """An unsettled message needs a retry, and a failed settlement one if it left no
        trace, while its row is still this claimed delivery (`delete_all()` may have
        removed it meanwhile)."""
        if state.outcome is not None and (state.task is None or not state.task.done()):
            # Still running (the deadline expired meanwhile): the row keeps its lease.
            return False
        row = state.row
        current = self.store.current(row)
        return current == (row.generation, row.attempt, "delivery")

    async def _invoke(self, messages: list[FanoutMessage[Any]]) -> None:
        failure: Exception | None = None
        try:
            await self._hand_over(messages)
        except Exception as error:
            failure = error
        if any(state.outcome is None for state in self.states):
            # Settlements the consumer wrapped in tasks it did not await take their
            # message once their task first runs: let those tasks start.
            await asyncio.sleep(0)
        self._close()
        if failure is None and self.target.ack_on_return:
            await self._ack_unsettled()
        started = [state.task for state in self.states if state.task is not None]
        running = [task for task in started if not task.done()]
        if running:
            # A consumer that raised must not bypass settlements already in flight.
            await asyncio.wait(running)
        if failure is not None:
            raise failure
        for task in started:
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

    async def _hand_over(self, messages: list[FanoutMessage[Any]]) -> None:
        deliver, storage = self.target.deliver, self.target.storage
        if deliver is not None:
            result = deliver(messages)
            if inspect.isawaitable(result):
                await result
        elif storage is not None:
            writes = await asyncio.gather(
                *(self._store_one(storage, message) for message in messages),
                return_exceptions=True,
            )
            for outcome in writes:
                if isinstance(outcome, BaseException):
                    raise outcome

    async def _store_one(self, write: MessageWrite, message: FanoutMessage[Any]) -> None:
        result: Any = write(
            StoredMessage(
                id=message.delivery_id,
                message_id=message.id,
                target=message.target,
                body=message.body,
                enqueued_at=message.enqueued_at,
                stored_at=now_ms(),
                attempts=message.attempt,
            )
        )
        if inspect.isawaitable(result):
            await result
        await message.ack()

    async def _ack_unsettled(self) -> None:
        """Ack what the consumer left unsettled, in one transaction, in this task.

        Running it here (not in a task of its own) lets the removal share the turn, and
        so the commit, of whatever else this object writes meanwhile.
        """
        unsettled = [state for state in self.states if state.outcome is None]
        if not unsettled:
            return
        finished = asyncio.get_running_loop().create_future()
        finished.add_done_callback(_retrieve)
        for state in unsettled:
            state.outcome = "ack"
            state.task = finished
        try:
            removed = await self.store.remove([state.row for state in unsettled])
        except asyncio.CancelledError:
            finished.cancel()
            raise
        except Exception as error:
            finished.set_exception(error)
            return
        for state in unsettled:
            # A row a later attempt already reclaimed stays with that attempt.
            if state.row.id in removed:
                state.completed = True
                self.settler.completed(state.row, self.started_at)
        finished.set_result(None)
