"""Claimed runs: the one a pass or an eager start claims (`Claimed`), and those a
create's own write claims as it inserts their instances (`CreateClaims`).

A create that finds permits free claims the first run of its new instances in its own
write, as a pass would (`attempt` 1, ``running``, `claim_alone` set), so one commit makes
the instance and its claim durable together; their runs start once that commit is
durable. The permits and keys are taken before the write (the engine's
`Reservation`), so a run never goes ahead of one waiting for a permit.
"""

from __future__ import annotations

from .._engine import Attempt, AttemptKind
from .engine import Reservation, WorkflowEngine
from .rows import Fence, InstanceRow

RUN_FAILED = "durability.workflows.run_failed"
"""How the failure of a run started outside an alarm pass is reported."""

NewInstance = tuple[int, str, str, int]
"""A new instance of a create's write: its position there, key, generation and creation
time."""


class Claimed:
    """A claimed run (an `Attempt`'s `data` once claimed): the row it was claimed from
    (`created`: as the create wrote it, to be read again when the run starts, since a
    pause may have been asked meanwhile), its fence, and whether it ended (not stopped
    by a storage failure) leaving work the timer must look at (it suspended, or the
    instance moved on under it)."""

    __slots__ = ("created", "fence", "owed", "row")

    def __init__(self, row: InstanceRow, fence: Fence, created: bool = False) -> None:
        self.row = row
        self.fence = fence
        self.created = created
        self.owed = False


class CreateClaims:
    """The first runs one create's write claims (see the module docstring)."""

    __slots__ = (
        "_alone",
        "_attempts",
        "_claimed",
        "_engine",
        "_positions",
        "_reservation",
        "_runs",
    )

    def __init__(self, engine: WorkflowEngine, kind: AttemptKind, new: list[NewInstance]) -> None:
        self._engine = engine
        self._attempts = {
            key: Attempt(kind, key, generation, created_at, 0, None)
            for _, key, generation, created_at in new
        }
        self._reservation: Reservation = engine.reserve(
            [self._attempts[key] for _, key, _, _ in new], [position for position, *_ in new]
        )
        self._positions = self._reservation.claims().keys()
        self._alone = 1 if engine.runs_alone else 0
        self._claimed: list[str] = []
        self._runs = 0
        """How many runs the write claimed."""

    def claim_alone(self, position: int) -> int | None:
        """In the write: the `claim_alone` the instance at `position` is inserted with
        (its run is claimed), or `None` (it is inserted queued)."""
        return self._alone if position in self._positions else None

    def inserted(self, row: InstanceRow) -> None:
        """In the write: `row` was inserted with its first run claimed."""
        self._attempts[row.key].data = Claimed(row, Fence(row.key, row.generation, 1), True)
        self._claimed.append(row.key)

    def written(self, inserted: int) -> None:
        """In the write, once every row is in: `inserted` rows were inserted in all
        (those claimed included)."""
        self._reservation.claimed(self._claimed, inserted)
        self._runs = len(self._claimed)
        self._claimed = []

    def release(self) -> None:
        """The write failed: give the permits and keys back."""
        self._reservation.release()

    def start(self, first: str) -> None:
        """After the write: once its commit is durable, run the instances it claimed and
        give the other reservations back; `first` names them in a failure report."""
        engine, reservation = self._engine, self._reservation
        if not self._runs:
            reservation.start()  # gives every reservation back
            return

        async def run() -> None:
            try:
                await engine.sync()
            except BaseException:
                reservation.release()
                raise
            # Each run's end reconciles the alarm (`Runner._finish`): none is owed after.
            started = reservation.start(reconcile=False)
            if started is not None:
                await started

        engine.in_background(run(), RUN_FAILED, {"instance": first})
