"""Taking an object instance down (eviction, crash, runtime close) and waiting for its
cancelled work to finish."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ._database import Database
from ._errors import ObjectEvictedError
from ._ids import ObjectId
from ._instance import Instance
from ._live import LiveInstances

logger = logging.getLogger("durability.runtime")

WIND_DOWN_TURNS = 100
"""Loop turns `wind_down` gives cancelled tasks to finish their cleanup."""


def discard(
    instance: Instance,
    *,
    crash: bool,
    error: BaseException | None = None,
    replies_lost: bool = False,
) -> list[asyncio.Future[Any]]:
    """Fence the instance, settle or drop its pending writes, cancel its work.

    `error`: why the instance is discarded, handed to its calls in flight
    (by default they learn that the object was evicted). `replies_lost`: calls whose
    commit has ended learn that too, instead of getting their results.
    """
    instance.fence()
    if instance.idle_timer is not None:
        instance.idle_timer.cancel()
        instance.idle_timer = None
    database = instance.database
    if crash:
        database.rollback(
            ObjectEvictedError(
                f"object {instance.id.namespace}:{instance.id} crashed before these "
                "writes were committed"
            )
        )
    else:
        database.commit()
    if crash:
        instance.host.sockets.reset((instance.id.namespace, str(instance.id)))
    pending = instance.cancel_work(error, replies_lost=replies_lost)
    if database.file is not None:
        database.close()
    return pending


async def wind_down(tasks: list[asyncio.Future[Any]]) -> None:
    """Let cancelled tasks finish their cleanup, a bounded number of loop turns.

    Turns, not time: under a virtual clock no time passes here. A task that keeps
    ignoring cancellation is left behind (it is fenced and can no longer write).
    """
    current = asyncio.current_task()
    waiting = [task for task in tasks if task is not current]
    for _ in range(WIND_DOWN_TURNS):
        waiting = [task for task in waiting if not task.done()]
        if not waiting:
            return
        await asyncio.sleep(0)
    logger.warning("%d task(s) ignored cancellation at eviction", len(waiting))


def crash_at_commit(
    live: LiveInstances, database: Database, object_id: ObjectId, replies_lost: bool
) -> None:
    """Crash the object at a commit of its `database` (`Faults.commit`): before it (its
    writes lost) or, with `replies_lost`, once it is durable (its callers' replies lost)."""
    instance = live.get((object_id.namespace, str(object_id)))
    if instance is not None and instance.database is database:
        live.remove(instance)
        discard(instance, crash=True, replies_lost=replies_lost)
    elif not replies_lost:
        database.rollback(
            ObjectEvictedError(f"object {object_id.namespace}:{object_id} crashed before commit")
        )
