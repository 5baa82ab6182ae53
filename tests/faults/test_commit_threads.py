"""Where object commits run: worker threads on the real clock, the loop under a VirtualClock.

The real-clock tests here take no time of their own: they wait on results, never on
the clock.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import MakeRuntime
from durability.runtime import DurableObject, Runtime, _log_syncs
from durability.runtime import _commit_threads as commit_threads
from durability.testing import VirtualClock

from ._inject import StorageFaults


class Counter(DurableObject):
    """One table of rows; an alarm that adds a row."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY)")

    async def add(self) -> int:
        self.ctx.storage.sql.exec("INSERT INTO rows DEFAULT VALUES")
        return int(self.ctx.storage.sql.exec("SELECT count(*) AS n FROM rows").one()["n"])

    async def arm(self, at_ms: int) -> None:
        await self.ctx.storage.set_alarm(at_ms)

    async def count(self) -> int:
        return int(self.ctx.storage.sql.exec("SELECT count(*) AS n FROM rows").one()["n"])

    async def alarm(self) -> None:
        self.ctx.storage.sql.exec("INSERT INTO rows DEFAULT VALUES")


def _commit_threads(faults: StorageFaults) -> list[str]:
    names: list[str] = []
    faults.watch(".sqlite3", "COMMIT", lambda: names.append(threading.current_thread().name))
    return names


async def test_real_clock_commits_run_in_worker_threads(
    tmp_path: Path, faults: StorageFaults
) -> None:
    """On the real clock, the first commit of each file runs off the loop (later ones sync
    off it, see tests/test_commit_syncs.py), and results still wait for them."""
    threads = _commit_threads(faults)
    async with Runtime(path=tmp_path, bindings={"C": Counter}) as rt:
        stubs = [rt.env.C.get_by_name(f"c{number}") for number in range(5)]
        assert await asyncio.gather(*(stub.add() for stub in stubs)) == [1] * 5
        assert await stubs[0].add() == 2
    loop_thread = threading.current_thread().name
    object_commits = [name for name in threads if name != loop_thread]
    assert object_commits and all(name.startswith("durability-commit") for name in object_commits)
    async with Runtime(path=tmp_path, bindings={"C": Counter}) as rt:
        assert await rt.env.C.get_by_name("c0").count() == 2


async def test_virtual_clock_commits_run_on_the_loop(
    tmp_path: Path, faults: StorageFaults, make_runtime: MakeRuntime
) -> None:
    """Under a VirtualClock every commit runs on the loop's thread (deterministic runs)."""
    threads = _commit_threads(faults)
    async with make_runtime(path=tmp_path, bindings={"C": Counter}) as rt:
        await asyncio.gather(*(rt.env.C.get_by_name(f"c{n}").add() for n in range(3)))
    assert threads and set(threads) == {threading.current_thread().name}


async def test_failed_threaded_commit_fails_every_joined_call(
    tmp_path: Path, faults: StorageFaults
) -> None:
    """A commit failing in a worker thread fails each call that joined it with its error."""
    async with Runtime(path=tmp_path, bindings={"C": Counter}) as rt:
        stub = rt.env.C.get_by_name("c")
        assert await stub.add() == 1
        faults.fail(".sqlite3", "COMMIT", message="disk I/O error (injected)")
        outcomes = await asyncio.gather(stub.add(), stub.add(), return_exceptions=True)
        for outcome in outcomes:
            assert isinstance(outcome, sqlite3.OperationalError)
            assert "injected" in str(outcome)
        assert await stub.count() == 1


async def test_failed_catalog_write_fails_the_threaded_commit_that_needs_it(
    tmp_path: Path, faults: StorageFaults
) -> None:
    """An alarm change commits only after its catalog entry: if that write fails, so does it."""
    async with Runtime(path=tmp_path, bindings={"C": Counter}) as rt:
        stub = rt.env.C.get_by_name("c")
        # A file created in this run does not wait for its entry: reopen it first.
        assert await stub.count() == 0
        await rt.evict(stub)
        faults.fail("_catalog.sqlite3", "COMMIT", message="catalog write failed (injected)")
        with pytest.raises(sqlite3.OperationalError, match="injected"):
            await stub.arm(4_000_000_000_000)
        await stub.arm(4_000_000_000_000)
    catalog = sqlite3.connect(tmp_path / "_catalog.sqlite3")
    try:
        assert catalog.execute("SELECT wake_ms FROM alarms").fetchall() == [(4_000_000_000_000,)]
    finally:
        catalog.close()


async def test_alarm_delivery_costs_two_object_commits(
    tmp_path: Path, faults: StorageFaults, make_runtime: MakeRuntime, clock: VirtualClock
) -> None:
    """The retry fallback joins alarm()'s own first commit: a delivery is two commits in all."""
    commits: list[str] = []
    async with make_runtime(path=tmp_path, bindings={"C": Counter}) as rt:
        stub = rt.env.C.get_by_name("c")
        await stub.arm(clock.now_ms() + 1_000)
        faults.watch("/C/", "COMMIT", lambda: commits.append("commit"))
        await clock.advance(1_000)
        assert len(commits) == 2
        assert await stub.count() == 1


async def test_delivery_cancelled_during_its_bookkeeping_commit_leaves_the_commit_whole(
    tmp_path: Path, faults: StorageFaults, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delivery cancelled (as at close) while its last commit is syncing does not
    cancel that commit: it ends normally, with no error in the loop, and the alarm stays
    delivered."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: errors.append(context))
    entered, release = threading.Event(), threading.Event()
    monkeypatch.setattr(commit_threads, "QUICK_SYNC_SECONDS", 0.0)  # syncs in threads
    sync = _log_syncs._sync_data
    syncs: list[int] = []

    def hold_bookkeeping(descriptor: int) -> None:
        # Once armed: alarm()'s own commit, then the delivery's bookkeeping one: held.
        if syncs:
            syncs.append(descriptor)
            if len(syncs) == 3:
                entered.set()
                release.wait()
        sync(descriptor)

    monkeypatch.setattr(_log_syncs, "_sync_data", hold_bookkeeping)
    try:
        async with Runtime(path=tmp_path, bindings={"C": Counter}) as rt:
            stub = rt.env.C.get_by_name("c")
            assert await stub.count() == 0
            await stub.arm(1)
            syncs.append(-1)
            await asyncio.to_thread(entered.wait)
            (delivery,) = [
                task
                for task in asyncio.all_tasks()
                if task.get_coro().__qualname__ == "AlarmDriver._deliver"  # type: ignore[union-attr]
            ]
            delivery.cancel()
            release.set()
            with pytest.raises(asyncio.CancelledError):
                await delivery
            assert await stub.count() == 1
        assert errors == []
    finally:
        release.set()
        loop.set_exception_handler(None)


class Disarming(Counter):
    """Counter with a call that disarms the alarm."""

    async def disarm(self) -> None:
        await self.ctx.storage.delete_alarm()


async def test_alarm_coming_due_while_a_failing_disarm_commits_still_fires(
    tmp_path: Path, faults: StorageFaults
) -> None:
    """The alarm comes due while the commit of a `delete_alarm()` is still running (on
    the loop or in a commit thread), and that commit then fails: the alarm was never
    disarmed, so it fires (the delivery must look at the row once the commit has ended,
    not at the uncommitted delete)."""
    entered, release = threading.Event(), threading.Event()
    async with Runtime(path=tmp_path, bindings={"C": Disarming}) as rt:
        stub = rt.env.C.get_by_name("c")
        due_s = 0.3
        await stub.arm(int((time.time() + due_s) * 1000))

        def hold() -> None:
            if not entered.is_set():
                entered.set()
                release.wait(10)

        faults.watch("/C/", "COMMIT", hold)
        faults.fail("/C/", "COMMIT", message="disarm lost (injected)")
        # A timer thread releases the commit past the alarm's time, wherever it runs
        # (a commit on the loop holds the loop until then).
        threading.Timer(due_s + 0.2, release.set).start()
        with pytest.raises(sqlite3.OperationalError, match="injected"):
            await stub.disarm()
        assert entered.is_set()
        for _ in range(100):
            if await stub.count() == 1:
                break
            await asyncio.sleep(0.05)
        assert await stub.count() == 1
