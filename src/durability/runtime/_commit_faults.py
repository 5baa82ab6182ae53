"""A runtime's `Faults.commit`, asked at each commit of one object's turn, and what the
runtime does with the answer (see `CommitPipeline.commit_turn`)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

from ._faults import Faults
from ._ids import ObjectId

if TYPE_CHECKING:
    from ._database import Database

Crash = Callable[["Database", ObjectId, bool], None]
"""The runtime's crash of an object at a commit of its database (`replies_lost`: after it)."""


class InjectedCommitError(sqlite3.OperationalError):
    """A commit failed because `Faults.commit` said so (a storage error like any other)."""


class CommitFaults:
    """The faults of one object's database: asked before each commit of a turn that wrote."""

    __slots__ = ("_crash", "_faults", "_object_id")

    def __init__(self, faults: Faults, object_id: ObjectId, crash: Crash) -> None:
        self._faults = faults
        self._object_id = object_id
        self._crash = crash

    def intercept(self, database: Database, transaction: asyncio.Future[None]) -> bool:
        """Apply the fault `Faults.commit` answers for this commit, if any: whether it
        took the commit over (`commit_turn` then does nothing more)."""
        fault = self._faults.commit(self._object_id)
        if fault is None:
            return False
        if fault == "fail":
            database.fail(
                InjectedCommitError(
                    f"disk I/O error (injected by Faults.commit into "
                    f"{self._object_id.namespace}:{self._object_id})"
                )
            )
        elif fault == "crash":
            self._crash(database, self._object_id, False)
        elif fault == "crash_after":
            database.pipeline.commit_now()
            if transaction.done() and not transaction.cancelled() and not transaction.exception():
                self._crash(database, self._object_id, True)
        else:
            database.fail(
                ValueError(
                    "Faults.commit must answer 'fail', 'crash', 'crash_after' or None, "
                    f"got {fault!r}"
                )
            )
        return True
