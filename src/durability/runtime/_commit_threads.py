"""The runtime's commit threads: object commits and other blocking file work, off the loop.

An object commit takes the lean path (`commit`): no `concurrent.futures.Future` and no
lock of the executor's, the worker hands the finished `Commit` to the loop itself, and
a waiter on another thread blocks on one lock. A live alarm delivery makes two commits,
so this is a large part of what a delivery costs the loop. Other work (the catalog's
late scan and writes, closing idle connections) uses the standard `submit`.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Executor, Future
from contextlib import suppress
from functools import partial
from typing import Any, TypeVar

T = TypeVar("T")

logger = logging.getLogger("durability.runtime")

QUICK_SYNC_SECONDS = 0.0005
"""Syncs shorter than this (on average) may run on the loop: on a fast disk a lone
object's sync costs the loop less there than a thread's round trip does, and blocks it
only briefly. Slower disks keep every sync in the threads."""

SYNC_WINDOW_TURNS = 2
"""Loop turns a sync round waits after the commit that asked for it while nobody waits
for that sync (see `CommitThreads.hurry`), so that commits the next turns make share it
(group commit counted in turns, not time). Two is what lets a registration's in-process
caller write again before the sync of the success its handler wrote meanwhile: one sync
per operation instead of two (see docs/operations.md)."""

_Job = tuple[Callable[..., Any], tuple[Any, ...], "Commit | None", Any, Any]
"""The function, its arguments, and for a commit: its handle, loop and callback."""


class Commit:
    """A commit handed to a commit thread: wait for it from any thread, or learn on the
    loop that it ended (the callback given to `CommitThreads.commit`)."""

    __slots__ = ("_running", "error")

    def __init__(self) -> None:
        self.error: BaseException | None = None
        self._running = threading.Lock()
        self._running.acquire()

    def wait(self) -> BaseException | None:
        """Block until the commit has ended; its error, if it failed."""
        with self._running:
            return self.error

    def end(self, error: BaseException | None) -> None:
        """Mark the commit ended (in the worker), with its error if it failed."""
        self.error = error
        self._running.release()


class Ticket:
    """One piece of a sync round's work, run in a thread in a job with others: wait for
    it from any thread (its own error, if it failed)."""

    __slots__ = ("arguments", "ended", "error", "function", "job")

    def __init__(
        self,
        function: Callable[..., object],
        arguments: tuple[Any, ...],
        ended: Callable[[Ticket], object],
    ) -> None:
        self.function = function
        self.arguments = arguments
        self.ended = ended
        self.error: BaseException | None = None
        self.job: Commit | None = None

    def wait(self) -> BaseException | None:
        """Block until the job holding this piece has ended; this piece's error."""
        assert self.job is not None
        return self.job.wait() or self.error


def _run_tickets(tickets: list[Ticket]) -> None:
    """A round's share of work in one thread: each piece, its failure kept apart."""
    for ticket in tickets:
        try:
            ticket.function(*ticket.arguments)
        except BaseException as error:
            ticket.error = error


def _tickets_ended(tickets: list[Ticket], job: Commit) -> None:
    for ticket in tickets:
        try:
            ticket.ended(ticket)
        except Exception:
            logger.exception("a commit sync could not end")


class CommitThreads(Executor):
    """`count` worker threads taking work from one queue, in order of arrival.

    The threads are daemons: a process that exits without closing its runtime stops
    them as a crash would (work still queued is not done; SQLite's commits are atomic
    across a crash, and no result waiting for one was released). They hold the queue,
    not this object: once it is garbage (a runtime that was never closed), they stop.
    """

    def __init__(self, count: int, name: str) -> None:
        jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._queue = jobs
        self._closed = False
        self._round: list[Callable[[bool], object]] = []
        self._window = 0
        """Turns the next round still waits for company (`SYNC_WINDOW_TURNS` at most)."""
        self._round_work: list[Ticket] = []
        self._sync_seconds = 0.0
        """Recent syncs' duration, a moving average."""
        self._threads: list[threading.Thread] = []
        self._stop = weakref.finalize(self, _stop_workers, jobs, self._threads)
        try:
            for number in range(count):
                thread = threading.Thread(
                    target=_work, args=(jobs,), name=f"{name}-{number}", daemon=True
                )
                thread.start()
                self._threads.append(thread)
        except BaseException:
            self.shutdown(wait=False)
            raise

    def commit(
        self,
        loop: asyncio.AbstractEventLoop,
        function: Callable[..., object],
        arguments: tuple[Any, ...],
        ended: Callable[[Commit], object],
    ) -> Commit:
        """Run `function(*arguments)` in a thread; then `ended(commit)` runs on `loop`."""
        if self._closed:
            raise RuntimeError("the commit threads are shut down")
        handle = Commit()
        self._queue.put((function, arguments, handle, loop, ended))
        return handle

    def sync_round(self, loop: asyncio.AbstractEventLoop, sync: Callable[[bool], object]) -> None:
        """Join the loop's next sync round (in `SYNC_WINDOW_TURNS` turns, or the next
        one once something waits for it: `hurry`): each member is called with whether
        it may sync on the loop. One may when it is alone in the round and syncs have
        been quick (`QUICK_SYNC_SECONDS`): a thread's round trip then costs the loop
        more than the sync. Otherwise members hand their syncs to `in_round`."""
        members = self._round
        members.append(sync)
        if len(members) == 1:
            self._window = SYNC_WINDOW_TURNS
            loop.call_soon(self._await_round, loop)

    def hurry(self) -> None:
        """Something waits for a sync of the next round: it runs at the next turn."""
        self._window = 0

    def _await_round(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._window > 0:
            self._window -= 1
            loop.call_soon(self._await_round, loop)
        else:
            self._run_round(loop)

    def in_round(
        self,
        function: Callable[..., object],
        arguments: tuple[Any, ...],
        ended: Callable[[Ticket], object],
    ) -> Ticket:
        """From a member of the running round: run `function(*arguments)` in a thread,
        beside the round's other such work (each thread takes a share, one job each), and
        then `ended(ticket)` on the loop."""
        ticket = Ticket(function, arguments, ended)
        self._round_work.append(ticket)
        return ticket

    def took(self, seconds: float) -> None:
        """Note how long a sync took (from any thread)."""
        self._sync_seconds += (seconds - self._sync_seconds) / 8

    def _run_round(self, loop: asyncio.AbstractEventLoop) -> None:
        members, self._round = self._round, []
        here = len(members) == 1 and self._sync_seconds < QUICK_SYNC_SECONDS
        for sync in members:
            try:
                sync(here)
            except Exception:  # one member's failure must not strand the others
                logger.exception("a commit sync could not start")
        work, self._round_work = self._round_work, []
        shares = min(len(work), len(self._threads))
        for share in range(shares):
            tickets = work[share::shares]
            try:
                handle = self.commit(
                    loop, _run_tickets, (tickets,), partial(_tickets_ended, tickets)
                )
            except RuntimeError:  # shut down: the work is done here, now
                handle = Commit()
                _run_tickets(tickets)
                handle.end(None)
                loop.call_soon(_tickets_ended, tickets, handle)
            for ticket in tickets:
                ticket.job = handle

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Run `fn(*args, **kwargs)` in a thread; its outcome in a standard future."""
        if self._closed:
            raise RuntimeError("the commit threads are shut down")
        future: Future[T] = Future()
        self._queue.put((_fill, (future, fn, args, kwargs), None, None, None))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Let the threads finish the work queued so far, then stop (joined if `wait`).

        Queued work is never cancelled (it holds commits): `cancel_futures` must be False.
        """
        if cancel_futures:
            raise ValueError("cancel_futures: queued commits cannot be cancelled")
        self._closed = True
        self._stop()
        if wait:
            for thread in self._threads:
                thread.join()


def _stop_workers(jobs: queue.SimpleQueue[_Job | None], threads: list[threading.Thread]) -> None:
    """One stop mark per thread, after the work already queued."""
    for _ in threads:
        jobs.put(None)


def _work(jobs: queue.SimpleQueue[_Job | None]) -> None:
    """A worker: run jobs until a stop mark. An idle worker holds no job (a finished
    commit's callback would otherwise keep its evicted object alive)."""
    while True:
        job = jobs.get()
        if job is None:
            return
        _run(*job)
        job = None


def _run(
    function: Callable[..., Any],
    arguments: tuple[Any, ...],
    handle: Commit | None,
    loop: asyncio.AbstractEventLoop | None,
    ended: Callable[[Commit], object] | None,
) -> None:
    """One job: a `submit` (which stores its own outcome), or a commit and its callback."""
    if handle is None:
        function(*arguments)
        return
    try:
        function(*arguments)
    except BaseException as error:  # handed to the loop, which fails the commit
        handle.end(error)
    else:
        handle.end(None)
    assert loop is not None and ended is not None
    with suppress(RuntimeError):  # the loop is closed: nobody is left to tell
        loop.call_soon_threadsafe(ended, handle)


def _fill(
    future: Future[T],
    fn: Callable[..., T],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    """Run `fn` for `submit` and store its outcome in `future`."""
    if not future.set_running_or_notify_cancel():
        return
    try:
        result = fn(*args, **kwargs)
    except BaseException as error:
        future.set_exception(error)
    else:
        future.set_result(result)
