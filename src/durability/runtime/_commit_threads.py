"""The runtime's commit threads: object commits and other blocking file work, off the loop.

An object commit takes the lean path (`commit`): no `concurrent.futures.Future` and no
lock of the executor's, the worker hands the finished `Commit` to the loop itself, and
a waiter on another thread blocks on one lock. A live alarm delivery makes two commits,
so this is a large part of what a delivery costs the loop. Other work (the catalog's
late scan and writes, closing idle connections) uses the standard `submit`.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from contextlib import suppress
from typing import Any, TypeVar

T = TypeVar("T")

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


class CommitThreads(Executor):
    """`count` worker threads taking work from one queue, in order of arrival.

    The threads are daemons: a process that exits without closing its runtime stops
    them as a crash would, and SQLite's commits are atomic across a crash.
    """

    def __init__(self, count: int, name: str) -> None:
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{number}", daemon=True)
            for number in range(count)
        ]
        for thread in self._threads:
            thread.start()

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

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Run `fn(*args, **kwargs)` in a thread; its outcome in a standard future."""
        if self._closed:
            raise RuntimeError("the commit threads are shut down")
        future: Future[T] = Future()
        self._queue.put((_fill, (future, fn, args, kwargs), None, None, None))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Let the threads finish the work queued so far, then stop (joined if `wait`)."""
        if not self._closed:
            self._closed = True
            for _ in self._threads:
                self._queue.put(None)
        if wait:
            for thread in self._threads:
                thread.join()

    def _work(self) -> None:
        while (job := self._queue.get()) is not None:
            function, arguments, handle, loop, ended = job
            if handle is None:
                function(*arguments)
                continue
            try:
                function(*arguments)
            except BaseException as error:  # handed to the loop, which fails the commit
                handle.end(error)
            else:
                handle.end(None)
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
