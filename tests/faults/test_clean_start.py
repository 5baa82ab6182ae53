"""A clean close leaves a mark so the next start scans no object file; a crash, or a
file changed while nothing ran, still has its alarm found."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import MakeRuntime
from durability.runtime import DurableObject, Runtime, _catalog
from durability.testing import VirtualClock

from .test_catalog_recovery import arm, fired_after
from .test_runtime_faults import bindings

KILLED_CHILD = """
import asyncio, sqlite3, sys, time
from durability.runtime import DurableObject, Runtime

async def main(path, file):
    runtime = Runtime(path=path, bindings={"NOTES": DurableObject})
    await runtime.start()
    # An alarm committed in the object file that the catalog never heard of.
    with sqlite3.connect(file) as connection:
        now = int(time.time() * 1000)
        connection.execute("UPDATE _durability_alarm SET scheduled_ms = ?", (now,))
    print("ready", flush=True)
    time.sleep(60)

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def no_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any scan of the object files fail the test."""

    def refuse(*args: Any) -> Any:
        raise AssertionError("start() scanned the object files after a clean close")

    monkeypatch.setattr(_catalog, "object_files", refuse)


async def test_clean_close_leaves_a_mark_and_the_next_start_scans_nothing(
    tmp_path: Path, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch, make_runtime: MakeRuntime
) -> None:
    """After a clean close start() lists no object file; the mark is gone while running."""
    await arm(tmp_path, clock, {"a": 1_000, "b": 2_000})
    assert (tmp_path / ".clean").exists()
    no_scan(monkeypatch)
    fired: list[Any] = []
    async with make_runtime(path=tmp_path, bindings=bindings(fired)):
        assert not (tmp_path / ".clean").exists()
        await clock.advance(5_000)
    assert sorted(name for name, _, _ in fired) == ["a", "b"]
    assert (tmp_path / ".clean").exists()


async def test_an_object_file_copied_in_while_stopped_is_found(
    tmp_path: Path, clock: VirtualClock
) -> None:
    """A file added to a namespace directory after a clean close has its alarm read."""
    await arm(tmp_path / "main", clock, {"a": 1_000})
    await arm(tmp_path / "other", clock, {"b": 2_000})
    (copied,) = (tmp_path / "other" / "NOTES").glob("*.sqlite3")
    shutil.copyfile(copied, tmp_path / "main" / "NOTES" / copied.name)
    assert await fired_after(tmp_path / "main", clock, 5_000) == ["a", "b"]


async def test_an_object_written_by_sqlite_while_stopped_is_found(
    tmp_path: Path, clock: VirtualClock
) -> None:
    """An alarm written straight into an object file after a clean close is delivered."""
    await arm(tmp_path, clock, {"a": 60_000, "b": 60_000})
    names = Runtime(bindings=bindings([])).namespace("NOTES")
    file = tmp_path / "NOTES" / f"{names.id_from_name('b')}.sqlite3"
    with sqlite3.connect(file) as connection:
        connection.execute("UPDATE _durability_alarm SET scheduled_ms = ?", (clock.now_ms(),))
    connection.close()
    assert await fired_after(tmp_path, clock, 1_000) == ["b"]


def killed_run(path: Path, file: Path) -> None:
    """A runtime on `path` whose object `file` commits an alarm the catalog never hears
    of; the process is SIGKILLed after that commit."""
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_CHILD, str(path), str(file)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"ready\n"
        assert not (path / ".clean").exists()
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL


def armed_then_killed(path: Path) -> None:
    """Objects a and b armed an hour ahead (clean close), then a run killed after b
    committed an alarm due now that the catalog does not have."""
    clock = VirtualClock(int(time.time() * 1000))
    asyncio.run(arm(path, clock, {"a": 3_600_000, "b": 3_600_000}))
    names = Runtime(bindings=bindings([])).namespace("NOTES")
    killed_run(path, path / "NOTES" / f"{names.id_from_name('b')}.sqlite3")


def test_a_killed_run_leaves_no_mark_and_its_alarm_is_found(tmp_path: Path) -> None:
    """A runtime SIGKILLed after an object committed an alarm the catalog lacks: the
    next start scans (no clean mark survives the crash) and delivers that alarm."""
    armed_then_killed(tmp_path)
    later = VirtualClock(int(time.time() * 1000))
    assert asyncio.run(fired_after(tmp_path, later, 1_000)) == ["b"]


class Waker(DurableObject):
    """Sets the event it is given when its alarm fires."""

    async def alarm(self) -> None:
        self.env.WOKEN.set()


def test_after_a_crash_on_the_real_clock_the_scan_runs_after_start(tmp_path: Path) -> None:
    """On the real clock start() does not wait for the scan of modified files: after a
    SIGKILLed run, the alarm the catalog lacks is armed once the scan finds it, and
    delivered; the clean close after it leaves the mark again."""
    armed_then_killed(tmp_path)

    async def run() -> None:
        woken = asyncio.Event()
        async with Runtime(path=tmp_path, bindings={"NOTES": Waker, "WOKEN": woken}):
            await woken.wait()

    asyncio.run(run())
    assert (tmp_path / ".clean").exists()


def test_a_close_during_the_scan_after_start_leaves_it_to_the_next_start(
    tmp_path: Path,
) -> None:
    """A runtime closed at once after a crash restart (its scan maybe unfinished) leaves
    no clean mark unless the scan ended; either way the next start finds the alarm."""
    clock = VirtualClock(int(time.time() * 1000))
    asyncio.run(arm(tmp_path, clock, {f"o{n}": 3_600_000 for n in range(50)}))
    (tmp_path / ".clean").unlink()
    names = Runtime(bindings=bindings([])).namespace("NOTES")
    file = tmp_path / "NOTES" / f"{names.id_from_name('o7')}.sqlite3"
    with sqlite3.connect(file) as connection:
        connection.execute("UPDATE _durability_alarm SET scheduled_ms = ?", (clock.now_ms(),))
    connection.close()

    async def start_and_close() -> None:
        async with Runtime(path=tmp_path, bindings=bindings([])):
            pass

    asyncio.run(start_and_close())
    later = VirtualClock(int(time.time() * 1000))
    assert asyncio.run(fired_after(tmp_path, later, 1_000)) == ["o7"]
