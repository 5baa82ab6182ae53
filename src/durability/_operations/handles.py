"""The handles users hold: `DurableOperation` (`durability.<name>`) and `DurableJob`.

Both only validate their arguments and delegate to the owning `Durability`, which keeps
every read and write of the records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._engine import HandlerEntry
from .._types import JsonValue, TimeInput
from .control import check_id
from .records import OperationResult

if TYPE_CHECKING:
    from .durability import Durability


class DurableOperation(HandlerEntry["Durability"]):
    """One operation of a `Durability`: call it to register, control, list or read ids."""

    __slots__ = ()

    async def __call__(
        self,
        id: str,
        payload: JsonValue = None,
        *,
        run_at: TimeInput | None = None,
        delay_ms: int | None = None,
    ) -> None:
        """Register call `id` with `payload`; returns once it is durable, never waits for it.

        The first attempt starts no earlier than `run_at` (ms or an aware datetime) or
        `delay_ms` from now (at most one of them; default: now).
        """
        await self._owner._register(self.name, id, payload, run_at, delay_ms)

    async def cancel(self, id: str) -> bool:
        """Make pending call `id` cancelled for good; a running attempt's signal is aborted
        with `DurableCancelledError` and its outcome ignored. False when `id` is missing
        or already completed, failed or cancelled."""
        return await self._owner._cancel(self.name, id)

    async def retry(self, id: str) -> bool:
        """Make failed or cancelled call `id` pending again with a fresh attempt budget
        (its next attempt is attempt 1). False for any other status."""
        return await self._owner._retry(self.name, id)

    async def list(
        self, *, status: str | None = None, limit: int = 100, after: str | None = None
    ) -> list[OperationResult]:
        """Up to `limit` of this operation's calls in id order, after id `after`, only
        those in `status` (``pending``, ``completed``, ``failed``, ``cancelled``) if given."""
        return self._owner._list(self.name, status, limit, after)

    async def get_result(self, id: str) -> OperationResult:
        """The stored state of call `id` (`DuplicateDurableCallError` if it is another's)."""
        return self._owner._result(self.name, id)[0]

    def job(self, id: str) -> DurableJob:
        """A handle on call `id` to read or wait for its outcome."""
        return DurableJob(self._owner, self.name, check_id(id))


class DurableJob:
    """A handle on one call: `get_result()` now, or `wait(timeout_ms=...)` for settlement."""

    __slots__ = ("_owner", "id", "operation")

    def __init__(self, owner: Durability, operation: str, id: str) -> None:
        self._owner = owner
        self.operation = operation
        self.id = id

    async def get_result(self) -> OperationResult:
        """The stored state of this call."""
        return self._owner._result(self.operation, self.id)[0]

    async def wait(self, *, timeout_ms: int = 30_000) -> OperationResult:
        """Wait until the call completes, fails or is purged, or `timeout_ms` elapses.

        Woken by settlement, not polling; returns the latest state, which is still
        ``pending`` on timeout. In memory only: a wait does not survive eviction.
        """
        return await self._owner._wait(self.operation, self.id, timeout_ms)

    def __repr__(self) -> str:
        return f"DurableJob({self.operation!r}, {self.id!r})"
