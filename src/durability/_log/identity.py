"""Which log a cold segment belongs to: the object's id and the log's epoch.

Offsets start again at 0 when the log's tables are created anew (after
`delete_all()`), and several objects may flush to one cold store, so offsets alone do
not name a segment. The epoch is a random id stored with the log and drawn when its
table is first needed; dropping the object's tables drops it too.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from contextvars import ContextVar

from .._context import Context, Storage
from .._engine import DurabilityScheduler
from .._faults import cold_store_fault
from .._uuid import random_bytes

EPOCH = "durability_log_epoch"

_writing: ContextVar[str] = ContextVar("durability_log_id", default="")


def current_log_id() -> str:
    """The id of the log whose segment `cold.write` is storing now ("" outside a write)."""
    return _writing.get()


async def writing_for(identity: str, write: Callable[[], object]) -> object:
    """Call the cold store's `write(...)`, awaiting its result when it is awaitable, with
    `current_log_id()` answering `identity` (a plain function's store works too); the
    runtime's faults, if any, are asked before and after it (`Faults.cold_store`)."""
    token = _writing.set(identity)
    try:
        cold_store_fault("write")
        value = write()
        written = await value if inspect.isawaitable(value) else value
        cold_store_fault("written")
        return written
    finally:
        _writing.reset(token)


def object_id_of(scheduler: DurabilityScheduler | None, context: Context | None) -> object:
    """The id of the object the log lives in (`None` if its context has none)."""
    if context is None and scheduler is not None:
        context = scheduler._engine.context
    return getattr(context, "id", None)


def log_id(storage: Storage, object_id: object) -> str:
    """`<object id>.<epoch>` for the log in `storage` (the epoch alone without an id)."""
    sql = storage.sql

    def epoch() -> str:
        sql.exec(
            f"CREATE TABLE IF NOT EXISTS {EPOCH} "
            "(id INTEGER PRIMARY KEY CHECK (id = 1), epoch TEXT NOT NULL)"
        )
        sql.exec(
            f"INSERT INTO {EPOCH} (id, epoch) VALUES (1, ?) ON CONFLICT (id) DO NOTHING",
            random_bytes(8).hex(),
        )
        return str(sql.exec(f"SELECT epoch FROM {EPOCH} WHERE id = 1").one()["epoch"])

    value = storage.transaction_sync(epoch)
    return value if object_id is None else f"{object_id}.{value}"
