"""The runtime's commit threads: the lean commit path and the standard executor API."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import pytest

from durability.runtime import DurableObject, Runtime
from durability.runtime._commit_threads import Commit, CommitThreads


class Noted(DurableObject):
    """Writes one row per call."""

    async def note(self) -> None:
        self.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY)")
        self.ctx.storage.sql.exec("INSERT INTO notes DEFAULT VALUES")


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
        # The two jobs run side by side in the two threads: in either order.
        assert sorted(ran_in)[0] == "first" and sorted(ran_in)[1].startswith("test-commit-")
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
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(RuntimeError, match="shut down"):
            threads.commit(loop, print, (), lambda _: None)
    finally:
        loop.close()
    with pytest.raises(ValueError, match="cancel_futures"):
        threads.shutdown(cancel_futures=True)


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


def _commit_threads_alive() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("durability-commit")]


def test_threads_stop_with_close_and_with_a_runtime_never_closed(tmp_path: Path) -> None:
    """`close()` stops the commit threads; a runtime started and dropped without it lets
    them go once it is garbage (no threads pile up in a process that forgets close)."""

    async def closed() -> None:
        async with Runtime(path=tmp_path / "closed", bindings={"O": Noted}) as rt:
            await rt.env.O.get_by_name("a").note()
            assert len(_commit_threads_alive()) == 8

    async def dropped() -> None:
        rt = Runtime(path=tmp_path / f"dropped{len(dropped_paths)}", bindings={"O": Noted})
        dropped_paths.append(rt)
        await rt.start()
        await rt.env.O.get_by_name("a").note()

    before = set(_commit_threads_alive())
    asyncio.run(closed())
    assert set(_commit_threads_alive()) <= before
    dropped_paths: list[Runtime] = []
    for _ in range(3):
        asyncio.run(dropped())
    started = set(_commit_threads_alive()) - before
    assert len(started) == 24
    dropped_paths.clear()
    # A job still running in a worker (a busy machine) holds its runtime until it ends:
    # collect again until the threads have gone.
    deadline = time.monotonic() + 10
    while any(thread.is_alive() for thread in started) and time.monotonic() < deadline:
        gc.collect()
        for thread in started:
            thread.join(0.05)
    assert not any(thread.is_alive() for thread in started)


def test_an_evicted_object_is_not_kept_alive_by_an_idle_worker(tmp_path: Path) -> None:
    """A worker waiting for work holds nothing of its last commit: the database of an
    evicted object (and with it the user's instance) can be freed."""

    async def main() -> weakref.ref[Any]:
        async with Runtime(path=tmp_path, bindings={"O": Noted}) as rt:
            stub = rt.env.O.get_by_name("a")
            await stub.note()
            instance = rt._live.get(("O", str(stub.id)))
            assert instance is not None
            database = weakref.ref(instance.database)
            del instance
            await rt.evict(stub)
            await asyncio.sleep(0.05)
            gc.collect()
            assert database() is None
            return database

    asyncio.run(main())
