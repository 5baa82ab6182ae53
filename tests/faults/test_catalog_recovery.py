"""The alarm catalog is only an index: lost, corrupt or stale, it is rebuilt from the
objects' own stored alarms, with a warning, and a clean restart opens no object."""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import MakeRuntime
from durability.runtime import Runtime, _catalog
from durability.testing import VirtualClock

from ._inject import StorageFaults
from .test_runtime_faults import bindings


async def arm(path: Path, clock: VirtualClock, alarms: dict[str, int]) -> None:
    """Arm each named object's alarm `delay` ms from now, then close cleanly."""
    async with Runtime(path=path, bindings=bindings([]), clock=clock) as rt:
        for name, delay in alarms.items():
            await rt.env.NOTES.get_by_name(name).arm(clock.now_ms() + delay)


async def fired_after(path: Path, clock: VirtualClock, ms: int) -> list[Any]:
    """Start a runtime on `path`, let `ms` pass, and return the alarms that fired."""
    fired: list[Any] = []
    async with Runtime(path=path, bindings=bindings(fired), clock=clock):
        await clock.advance(ms)
    return sorted(name for name, _, _ in fired)


async def test_missing_catalog_is_rebuilt_from_the_objects(
    tmp_path: Path, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """With the catalog file deleted, every armed alarm still fires, names included."""
    await arm(tmp_path, clock, {"a": 1_000, "b": 5_000})
    (tmp_path / "_catalog.sqlite3").unlink()
    with caplog.at_level(logging.WARNING, "durability.runtime"):
        assert await fired_after(tmp_path, clock, 10_000) == ["a", "b"]
    assert "_catalog.sqlite3 was missing: rebuilt" in caplog.text


async def test_corrupt_catalog_is_set_aside_and_rebuilt(
    tmp_path: Path, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A corrupt catalog does not stop start(): it is kept aside, rebuilt, and named."""
    await arm(tmp_path, clock, {"a": 1_000})
    catalog = tmp_path / "_catalog.sqlite3"
    catalog.write_bytes(b"garbage, not a database" * 300)
    with caplog.at_level(logging.WARNING, "durability.runtime"):
        assert await fired_after(tmp_path, clock, 10_000) == ["a"]
    assert f"{catalog} was corrupt" in caplog.text
    assert [p.name.startswith("_catalog.sqlite3.corrupt-") for p in tmp_path.iterdir()].count(
        True
    ) == 1


async def test_catalog_older_than_the_objects_is_corrected(
    tmp_path: Path, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A catalog restored from before an alarm was armed still gets that alarm delivered."""
    await arm(tmp_path, clock, {"a": 60_000})
    saved = tmp_path / "saved-catalog"
    shutil.copyfile(tmp_path / "_catalog.sqlite3", saved)
    await arm(tmp_path, clock, {"b": 1_000, "a": 2_000})
    shutil.copyfile(saved, tmp_path / "_catalog.sqlite3")
    with caplog.at_level(logging.WARNING, "durability.runtime"):
        assert await fired_after(tmp_path, clock, 10_000) == ["a", "b"]
    assert "was older than 2 object(s)" in caplog.text


async def test_clean_restart_opens_no_object(
    tmp_path: Path,
    clock: VirtualClock,
    faults: StorageFaults,
    caplog: pytest.LogCaptureFixture,
    make_runtime: MakeRuntime,
) -> None:
    """After a clean close, start() arms every alarm from the catalog without opening objects."""
    await arm(tmp_path, clock, {f"o{index}": 1_000 * (index + 1) for index in range(5)})
    # Files written within a moment of the close are read again (file times may lag):
    # date these back, as if written long before it.
    hour_ago = time.time() - 3_600
    for file in (tmp_path / "NOTES").iterdir():
        os.utime(file, (hour_ago, hour_ago))
    clock = VirtualClock(clock.now_ms() + 10_000)
    faults.opened.clear()
    fired: list[Any] = []
    with caplog.at_level(logging.WARNING, "durability.runtime"):
        async with make_runtime(path=tmp_path, bindings=bindings(fired), clock=clock) as rt:
            assert [Path(file).name for file in faults.opened] == ["_catalog.sqlite3"]
            await clock.advance(0)
            assert len(fired) == 5
            await rt.env.NOTES.get_by_name("o0").put("k", 1)
    assert caplog.text == ""


async def test_catalog_io_error_at_start_names_the_file_and_keeps_it(
    tmp_path: Path, clock: VirtualClock, faults: StorageFaults
) -> None:
    """An I/O error opening the catalog fails start() naming the file; nothing is set aside."""
    await arm(tmp_path, clock, {"a": 1_000})
    catalog = tmp_path / "_catalog.sqlite3"
    faults.fail("_catalog", "PRAGMA journal_mode")
    with pytest.raises(sqlite3.OperationalError, match=str(catalog)):
        await Runtime(path=tmp_path, bindings=bindings([]), clock=clock).start()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == [
        ".lock",
        "_catalog.sqlite3",
    ]
    assert await fired_after(tmp_path, clock, 10_000) == ["a"]


def abandoned_run(path: Path, name: str, alarm_ms: int | None = None) -> None:
    """A runtime in another process writes to object `name` (or sets its alarm for
    `alarm_ms`), then dies without closing."""
    child = Path(__file__).with_name("_abandoned_run.py")
    extra = [] if alarm_ms is None else [str(alarm_ms)]
    subprocess.run([sys.executable, str(child), str(path), name, *extra], check=True, timeout=60)


async def test_new_object_killed_before_its_catalog_entry_keeps_its_alarm(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A new object's first commit does not wait for its catalog entry: a process killed
    after that commit, before the entry is written, still has the alarm delivered."""
    # The child runs on the real clock: the alarm is a minute ahead of it.
    clock = VirtualClock(int(time.time() * 1000))
    await arm(tmp_path, clock, {"old": 3_600_000})
    abandoned_run(tmp_path, "new", clock.now_ms() + 60_000)
    catalog = sqlite3.connect(tmp_path / "_catalog.sqlite3")
    try:
        names = [name for (name,) in catalog.execute("SELECT name FROM alarms")]
    finally:
        catalog.close()
    assert names == ["old"]
    with caplog.at_level(logging.WARNING, logger="durability.runtime"):
        assert await fired_after(tmp_path, clock, 120_000) == ["new"]
    assert "their alarms were restored from the objects" in caplog.text


async def test_after_a_crash_only_what_the_crashed_run_touched_is_read(
    tmp_path: Path,
    faults: StorageFaults,
    monkeypatch: pytest.MonkeyPatch,
    make_runtime: MakeRuntime,
) -> None:
    """Each start records that the catalog agrees with the objects: after two crashed
    runs, start() reads only the object the last one wrote, not the earlier one's."""
    # The children run on the real clock: the alarms are far ahead of it, and stay armed.
    clock = VirtualClock(int(time.time() * 1000))
    await arm(tmp_path, clock, {f"o{index}": 3_600_000 for index in range(4)})
    abandoned_run(tmp_path, "o2")
    abandoned_run(tmp_path, "o1")
    monkeypatch.setattr(_catalog, "AGREED_MARGIN_NS", 0)
    faults.opened.clear()
    async with make_runtime(path=tmp_path, bindings=bindings([]), clock=clock) as rt:
        read = sorted(Path(file).name for file in faults.opened)
        assert read == sorted(["_catalog.sqlite3", f"{rt.env.NOTES.id_from_name('o1')}.sqlite3"])
