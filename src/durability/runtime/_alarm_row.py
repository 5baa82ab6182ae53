"""The object's persisted alarm row: the user's alarm and the runtime's pending retry.

Kept in memory by the database once read or written (`Database.alarm_row`), so the
alarm is read from SQLite only after a rollback may have undone a write.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import cast

from ._database import UNREAD, Database

MAX_ALARM_RETRIES = 6
"""Retries after a raising `alarm()` (7 calls in all), as on Cloudflare."""

FIRST_RETRY_DELAY_MS = 2_000
"""The first retry waits 2 s; each further one waits twice as long."""


@dataclass(frozen=True, slots=True)
class AlarmRow:
    """The persisted alarm: the user's alarm, and the runtime's pending retry."""

    scheduled_ms: int | None
    retry_ms: int | None = None
    retry_attempt: int = 0

    @property
    def wake_ms(self) -> int | None:
        """When the runtime must look at this object next."""
        times = [t for t in (self.scheduled_ms, self.retry_ms) if t is not None]
        return min(times) if times else None


def read_alarm(database: Database) -> AlarmRow | None:
    """The stored alarm row (`None` when nothing is armed), as the open transaction sees it.

    Every write of the row goes through `write_alarm`, so the database keeps the last row
    read or written and forgets it whenever a rollback may have undone a write. A commit
    still running in a worker thread is waited for first: if it fails, its rollback
    undoes the writes the kept row may show.
    """
    database.settle()
    cached = database.alarm_row
    if cached is not UNREAD:
        return cast("AlarmRow | None", cached)
    rows = database.query(
        "SELECT scheduled_ms, retry_ms, retry_attempt FROM _durability_alarm WHERE id = 1"
    )
    row = AlarmRow(*rows[0]) if rows else None
    database.alarm_row = row
    return row


def write_alarm(database: Database, row: AlarmRow | None) -> asyncio.Future[None]:
    """Store `row` (deleting it when it arms nothing) in the turn's transaction."""
    commit = database.join()
    if row is None or row.wake_ms is None:
        database.execute("DELETE FROM _durability_alarm WHERE id = 1")
    else:
        database.execute(
            "INSERT INTO _durability_alarm (id, scheduled_ms, retry_ms, retry_attempt)"
            " VALUES (1, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET scheduled_ms ="
            " excluded.scheduled_ms, retry_ms = excluded.retry_ms,"
            " retry_attempt = excluded.retry_attempt",
            row.scheduled_ms,
            row.retry_ms,
            row.retry_attempt,
        )
    database.alarm_changed = True
    database.alarm_row = None if row is None or row.wake_ms is None else row
    return commit


def retry_delay_ms(attempt: int) -> int:
    """The backoff before retry number `attempt` (1-based): 2 s, 4 s, 8 s, ..."""
    return FIRST_RETRY_DELAY_MS << (attempt - 1)
