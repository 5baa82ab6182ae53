"""What a helper registers with the engine so that alarm passes run its due work."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from .._context import SqlStorage
from .tables import TableSpec


class HostAlarmInfo(Protocol):
    """What a host passes to `alarm(info)`: the platform's retry bookkeeping.

    The embedded runtime passes a `durability.runtime.AlarmInvocationInfo`; any object
    with these two attributes will do.
    """

    @property
    def retry_count(self) -> int: ...

    @property
    def is_retry(self) -> bool: ...


@dataclass(eq=False, slots=True)
class Participant:
    """One table whose due work alarm passes run.

    `next_pending_at(sql)` replaces the default pending-time query for tables without
    `status`/`next_attempt_at`; `holding()` True means the participant serves its due
    work itself right now, so only the physical alarm (not the timer) counts it.
    """

    table: TableSpec
    run_due: Callable[[int, HostAlarmInfo | None], Awaitable[None]]
    next_pending_at: Callable[[SqlStorage], int | None] | None = None
    holding: Callable[[], bool] | None = None
