"""The output gate: a finished call's result is released only once its writes are durable."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ._database import Database
from ._storage import CallRecord

_Gated = tuple[asyncio.Future[object], object, bool]
"""A finished call waiting for its commit: its outcome, result, whether it raised."""

Release = Callable[[asyncio.Future[object], object, bool], None]
Done = Callable[[asyncio.Future[object]], None]


def commits_to_wait(database: Database, record: CallRecord) -> asyncio.Future[None] | None:
    """The commit a call's result must still wait for (`None`: already durable).

    That is the database's latest commit not yet durable, if any: the call joined it or
    may have observed its writes. Commits end in order, and a failed sync fails every
    later one too, so the other commits the call joined have ended when it does; one
    that already failed raises its error here. The record is closed: commits joined
    from now on are not its call's.
    """
    pending = database.pending_commit
    if pending is not None:
        database.pipeline.syncs.hurry()
    commits, record.commits = record.commits, None
    if commits:
        for commit in commits:
            if commit is not pending and commit.done():
                commit.result()
    return pending


class OutputGate:
    """Finished calls held until their commit ends: then `release` gets each outcome
    (the commit's own error if it failed) and `done` each call's outcome future."""

    __slots__ = ("_done", "_gated", "_release")

    def __init__(self, release: Release, done: Done) -> None:
        self._gated: dict[asyncio.Future[None], list[_Gated]] = {}
        self._release = release
        self._done = done

    def hold(
        self,
        commit: asyncio.Future[None],
        outcome: asyncio.Future[object],
        result: object,
        raised: bool,
    ) -> None:
        """Release `result` once `commit` has ended."""
        # The commit's one done-callback releases every result gated on it, so a call
        # costs no wake-up of its own after its writes are durable.
        waiting = self._gated.get(commit)
        if waiting is None:
            waiting = self._gated[commit] = []
            commit.add_done_callback(self._open)
        waiting.append((outcome, result, raised))

    def open_ended(self, lost: BaseException | None = None) -> None:
        """Release now the calls whose commit has ended but whose callback has not run
        (each with `lost` instead of its outcome, when given: its reply was lost)."""
        for commit in [commit for commit in self._gated if commit.done()]:
            self._open(commit, lost)

    def _open(self, commit: asyncio.Future[None], lost: BaseException | None = None) -> None:
        error = lost or (None if commit.cancelled() else commit.exception())
        for outcome, result, raised in self._gated.pop(commit, ()):
            if error is not None:
                self._release(outcome, error, True)
            else:
                self._release(outcome, result, raised)
            self._done(outcome)
