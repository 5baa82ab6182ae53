"""The runtime's commit threads: the lean commit path and the standard executor API."""

from __future__ import annotations

import asyncio
import threading

import pytest

from durability.runtime._commit_threads import Commit, CommitThreads


async def test_a_commit_ends_on_the_loop_with_its_error() -> None:
    """`commit` runs the function in a thread, then calls back on the loop with the
    handle; a raise becomes the handle's error, not an exception in the thread."""
    loop = asyncio.get_running_loop()
    threads = CommitThreads(2, "test-commit")
    ended: asyncio.Queue[tuple[Commit, bool]] = asyncio.Queue()
    ran_in: list[str] = []

    def record(commit: Commit) -> None:
        ended.put_nowait((commit, threading.current_thread() is threading.main_thread()))

    def fail() -> None:
        ran_in.append(threading.current_thread().name)
        raise OSError("disk full")

    try:
        ok = threads.commit(loop, ran_in.append, ("first",), record)
        bad = threads.commit(loop, fail, (), record)
        results = {id(commit): on_loop for commit, on_loop in [await ended.get() for _ in "ab"]}
        assert results == {id(ok): True, id(bad): True}
        assert ok.wait() is None
        error = bad.wait()
        assert isinstance(error, OSError) and str(error) == "disk full"
        assert ran_in[0] == "first" and ran_in[1].startswith("test-commit-")
    finally:
        threads.shutdown()


def test_wait_blocks_until_the_commit_ended() -> None:
    """A waiter on another thread (the loop needing the connection back) blocks until
    the worker has finished."""
    threads = CommitThreads(1, "test-commit")
    gate = threading.Event()
    loop = asyncio.new_event_loop()
    try:
        commit = threads.commit(loop, gate.wait, (5,), lambda _: None)
        waited: list[BaseException | None] = []
        waiter = threading.Thread(target=lambda: waited.append(commit.wait()))
        waiter.start()
        waiter.join(0.05)
        assert waiter.is_alive() and waited == []
        gate.set()
        waiter.join(5)
        assert waited == [None]
    finally:
        threads.shutdown()
        loop.close()


def test_submit_is_a_standard_executor() -> None:
    """`submit` gives a `concurrent.futures.Future` with the result or the exception;
    work queued before `shutdown` still runs, and nothing is taken after it."""
    threads = CommitThreads(2, "test-commit")
    doubled = threads.submit(lambda value: value * 2, 21)
    failed = threads.submit(int, "not a number")
    assert doubled.result(5) == 42
    with pytest.raises(ValueError, match="invalid literal"):
        failed.result(5)
    later = threads.submit(lambda: "queued before shutdown")
    threads.shutdown(wait=True)
    assert later.result(0) == "queued before shutdown"
    with pytest.raises(RuntimeError, match="shut down"):
        threads.submit(print)
    with pytest.raises(RuntimeError, match="shut down"):
        threads.commit(asyncio.new_event_loop(), print, (), lambda _: None)


def test_a_commit_ending_after_its_loop_closed_is_dropped_quietly() -> None:
    """A commit that ends once its loop is closed has nobody to tell: the worker goes on
    with the next job instead of dying."""
    threads = CommitThreads(1, "test-commit")
    loop = asyncio.new_event_loop()
    gate = threading.Event()
    try:
        commit = threads.commit(loop, gate.wait, (5,), lambda _: None)
        loop.close()
        gate.set()
        assert commit.wait() is None
        assert threads.submit(lambda: "still working").result(5) == "still working"
    finally:
        threads.shutdown()
