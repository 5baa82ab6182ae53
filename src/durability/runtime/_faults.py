"""Fault injection: the points where the embedded runtime asks whether something fails now.

A `Runtime(faults=...)` asks its `Faults` before each commit of an object's turn, at each
`set_alarm`, when it queues an object's alarm, and around each cold-store call a log
makes inside one of its objects (through `durability._faults.FaultSite`). The default
answers inject nothing; a test overrides the points it wants to break. The faults are
the runtime's own failure paths (a failed commit, a crash, a late alarm), so what a test
sees is what production would do.
"""

from __future__ import annotations

from typing import Literal

from .._faults import ColdAction
from ._ids import ObjectId

__all__ = ["CommitFault", "Faults"]

CommitFault = Literal["fail", "crash", "crash_after"]
"""What `Faults.commit` may answer: fail the commit, crash before it, or crash after it."""


class Faults:
    """Where a `Runtime` asks whether something fails now; every default injects nothing.

    Subclass it and override the points to break. Each point is called on the event
    loop, at the moment the runtime is about to do the thing, with the object's id.
    """

    def commit(self, object_id: ObjectId) -> CommitFault | None:
        """Before the runtime commits the writes of one turn of the object.

        `"fail"`: the commit fails with a storage error (`sqlite3.OperationalError`):
        every call that joined it gets that error, and the instance is rebuilt on its next
        use. `"crash"`: the object crashes before the commit, as `Runtime.crash` does: the
        writes are lost and the calls waiting for them get `ObjectEvictedError`.
        `"crash_after"`: the commit is made durable, then the object crashes before any
        call waiting for it is answered: the writes stay, the replies are lost (callers get
        `ObjectEvictedError`). `None`: the commit goes ahead.
        """
        return None

    def set_alarm(self, object_id: ObjectId, scheduled_ms: int) -> None:
        """Before `storage.set_alarm(scheduled_ms)` writes anything: raise to make that call
        fail with the error raised (nothing is written)."""

    def alarm_delay_ms(self, object_id: ObjectId, scheduled_ms: int) -> int:
        """When the runtime queues the object's alarm, due at `scheduled_ms`: how many
        milliseconds later it is delivered (0: on time). A late delivery is within the
        contract (an alarm runs at or after its time), and it reorders the alarms of
        different objects."""
        return 0

    def cold_store(self, object_id: ObjectId | None, action: ColdAction) -> None:
        """Around a log's call to its cold store, made inside the object: `"read"` before
        a read, `"write"` before a write, `"written"` after a write returned (its segment
        landed). Raise to make the call fail with the error raised."""
