"""`durability inspect`: object names, read-only reports, the text and JSON views."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import durability
from conftest import MakeRuntime
from durability import (
    Durability,
    DurabilityAlarms,
    DurabilityLog,
    DurabilityScheduler,
    DurableAlarmInfo,
    DurableCall,
    LogAppendInput,
    LogLeaseOptions,
    RetryPolicy,
)
from durability._engine.migrations import migrate
from durability._fanout.schema import FANOUT_MIGRATIONS
from durability.cli import main
from durability.cli._inspect import InspectError, inspect_path
from durability.runtime import AlarmInvocationInfo, DurableObject, Runtime
from durability.testing import VirtualClock

DAY_MS = 86_400_000


class Shop(DurableObject):
    """An object with a failing operation, a named alarm and a log with a cursor and a lease."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.scheduler = DurabilityScheduler(context=ctx)
        self.durability = Durability(
            scheduler=self.scheduler,
            handlers={"charge": self.charge},
            retries=RetryPolicy(max_attempts=2),
        )
        self.alarms = DurabilityAlarms(
            scheduler=self.scheduler, handlers={"renew": self.renew, "sweep": self.sweep}
        )
        self.log: DurabilityLog[Any] = DurabilityLog(
            scheduler=self.scheduler, leases=LogLeaseOptions()
        )

    async def charge(self, call: DurableCall) -> None:
        raise RuntimeError(f"card declined for {call.id}")

    async def renew(self, info: DurableAlarmInfo) -> None:
        """Nothing to do: the test only looks at the schedule."""

    async def sweep(self, info: DurableAlarmInfo) -> None:
        raise LookupError("nothing to sweep")

    async def fill(self) -> None:
        await self.durability.charge(id="inv-1", payload={"amount": 5})
        await self.alarms.renew(durability.now_ms() + DAY_MS)
        await self.alarms.sweep(durability.now_ms())
        await self.log.append([LogAppendInput({"n": n}) for n in range(3)])
        await self.log.commit("mailer", 1)
        await self.log.lease("indexer", 2)

    async def touch(self) -> None:
        await self.ctx.storage.put("seen", True)

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.scheduler.alarm(info)


@pytest.fixture
async def served(
    tmp_path: Path, clock: VirtualClock, make_runtime: MakeRuntime
) -> AsyncIterator[Runtime]:
    """A running file-backed runtime with one filled shop, `acme`, whose charge failed."""
    async with make_runtime(path=tmp_path / "data", bindings={"SHOPS": Shop}) as rt:
        await rt.env.SHOPS.get_by_name("acme").fill()
        await clock.advance(60_000)
        yield rt


def _only(path: Path, *args: str) -> dict[str, Any]:
    reports = inspect_path(path, *args)
    assert len(reports) == 1
    return reports[0]


async def test_the_name_is_recorded_in_the_object_file(
    tmp_path: Path, make_runtime: MakeRuntime
) -> None:
    """An object reached by name keeps that name in its own file, in its first commit."""
    async with make_runtime(path=tmp_path, bindings={"SHOPS": Shop}) as rt:
        await rt.env.SHOPS.get_by_name("acme").touch()
    (file,) = (tmp_path / "SHOPS").glob("*.sqlite3")
    with sqlite3.connect(file) as connection:
        rows = connection.execute("SELECT id, name FROM _durability_name").fetchall()
    assert rows == [(1, "acme")]


async def test_an_object_reached_by_id_learns_its_name_later(
    tmp_path: Path, make_runtime: MakeRuntime
) -> None:
    """An object first reached by parsed id gets its name once it is reached by name."""
    async with make_runtime(path=tmp_path, bindings={"SHOPS": Shop}) as rt:
        hex_id = str(rt.env.SHOPS.id_from_name("acme"))
        await rt.env.SHOPS.get(rt.env.SHOPS.id_from_string(hex_id)).touch()
        assert _only(tmp_path)["name"] is None
        await rt.evict(rt.env.SHOPS.get_by_name("acme"))
        await rt.env.SHOPS.get_by_name("acme").touch()
    assert _only(tmp_path)["name"] == "acme"


async def test_ctx_id_name_comes_from_the_file_after_a_restart(
    tmp_path: Path, make_runtime: MakeRuntime
) -> None:
    """After a restart, an object reached by id alone sees its recorded name in ctx.id."""
    async with make_runtime(path=tmp_path, bindings={"SHOPS": Shop}) as rt:
        await rt.env.SHOPS.get_by_name("acme").touch()
        hex_id = str(rt.env.SHOPS.id_from_name("acme"))
    seen: list[str | None] = []

    class Peek(Shop):
        async def touch(self) -> None:
            seen.append(self.ctx.id.name)

    async with make_runtime(path=tmp_path, bindings={"SHOPS": Peek}) as rt:
        await rt.env.SHOPS.get(rt.env.SHOPS.id_from_string(hex_id)).touch()
    assert seen == ["acme"]


async def test_delete_all_keeps_the_name(tmp_path: Path, make_runtime: MakeRuntime) -> None:
    """`storage.delete_all()` empties the object but it still shows under its name (with
    the empty tables its live helpers made again, as a new instance's would)."""

    class Wiper(Shop):
        async def wipe(self) -> None:
            await self.ctx.storage.delete_all()

    async with make_runtime(path=tmp_path, bindings={"SHOPS": Wiper}) as rt:
        stub = rt.env.SHOPS.get_by_name("acme")
        await stub.fill()
        await stub.wipe()
    report = _only(tmp_path)
    assert report["name"] == "acme"
    assert report["operations"] == {}
    assert report["log"]["next_offset"] == report["log"]["hot_records"] == 0


async def test_report_while_the_runtime_serves_the_path(served: Runtime, tmp_path: Path) -> None:
    """Read-only, beside a running runtime: name, alarm, failed operation, alarms, log."""
    report = _only(tmp_path / "data")
    assert report["namespace"] == "SHOPS"
    assert report["name"] == "acme"
    assert report["id"] == str(served.env.SHOPS.id_from_name("acme"))
    assert report["size_bytes"] > 0
    assert report["operations"] == {"failed": 1}
    (operation,) = report["operation_details"]
    assert operation["id"] == "inv-1"
    assert operation["attempt"] == 2
    assert operation["last_error_name"] == "RuntimeError"
    assert operation["last_error"] == "card declined for inv-1"
    assert "in charge" in operation["last_error_stack"]
    renew, sweep = sorted(report["named_alarms"], key=lambda alarm: alarm["name"])
    assert (renew["status"], renew["last_error"], renew["last_error_stack"]) == (
        "pending",
        None,
        None,
    )
    assert (sweep["last_error_name"], sweep["last_error"]) == ("LookupError", "nothing to sweep")
    assert "in sweep" in sweep["last_error_stack"]
    assert (sweep["status"], sweep["attempt"]) == ("failed", 5)
    assert report["alarm_at"] == renew["next_attempt_at"]
    log = report["log"]
    assert (log["oldest_offset"], log["next_offset"], log["hot_records"]) == (0, 3, 3)
    assert [(c["consumer"], c["offset"], c["lag"]) for c in log["cursors"]] == [("mailer", 1, 2)]
    assert [(lease["consumer"], lease["first_offset"]) for lease in log["leases"]] == [
        ("indexer", 0)
    ]
    assert report["fanout"] is None


async def test_inspect_writes_nothing(served: Runtime, tmp_path: Path) -> None:
    """Inspecting leaves every file under the path exactly as it was."""
    data = tmp_path / "data"

    def snapshot() -> dict[str, tuple[int, int]]:
        return {
            str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in data.rglob("*") if p.is_file()
        }

    before = snapshot()
    inspect_path(data)
    assert snapshot() == before


async def test_inspect_reads_a_closed_runtime_directory(
    tmp_path: Path, clock: VirtualClock, make_runtime: MakeRuntime
) -> None:
    """Once the runtime has closed (WAL checkpointed), the files still read as before."""
    async with make_runtime(path=tmp_path, bindings={"SHOPS": Shop}) as rt:
        await rt.env.SHOPS.get_by_name("acme").fill()
    assert _only(tmp_path, "SHOPS", "acme")["operations"] == {"pending": 1}


async def test_filters_by_namespace_and_name_or_id(served: Runtime, tmp_path: Path) -> None:
    """NAMESPACE narrows to one binding, NAME to one object (by name or by hex id)."""
    await served.env.SHOPS.get_by_name("globex").touch()
    data = tmp_path / "data"
    assert [r["name"] for r in inspect_path(data)] == sorted(
        ["acme", "globex"], key=lambda n: str(served.env.SHOPS.id_from_name(n))
    )
    assert len(inspect_path(data, "SHOPS")) == 2
    assert _only(data, "SHOPS", "globex")["name"] == "globex"
    hex_id = str(served.env.SHOPS.id_from_name("acme"))
    assert _only(data, "SHOPS", hex_id)["name"] == "acme"


def test_missing_and_foreign_paths_are_refused(tmp_path: Path) -> None:
    """A missing path, a file, or a folder with no runtime data raise InspectError."""
    with pytest.raises(InspectError, match="no such directory"):
        inspect_path(tmp_path / "missing")
    (tmp_path / "file.txt").write_text("hello")
    with pytest.raises(InspectError, match="not a directory"):
        inspect_path(tmp_path / "file.txt")
    with pytest.raises(InspectError, match="not a durability runtime directory"):
        inspect_path(tmp_path)


async def test_unknown_namespace_and_object_are_refused(served: Runtime, tmp_path: Path) -> None:
    """An unknown NAMESPACE lists the known ones; an unknown NAME names what is missing."""
    with pytest.raises(InspectError, match=r"namespace 'ORDERS' \(found: SHOPS\)"):
        inspect_path(tmp_path / "data", "ORDERS")
    with pytest.raises(InspectError, match="no object 'initech'"):
        inspect_path(tmp_path / "data", "SHOPS", "initech")


def test_a_corrupt_object_file_is_reported_not_raised(tmp_path: Path) -> None:
    """A file SQLite cannot read shows as that object's error; the others still show."""
    (tmp_path / "SHOPS").mkdir()
    (tmp_path / "SHOPS" / f"{'a' * 64}.sqlite3").write_bytes(b"not a database" * 100)
    (report,) = inspect_path(tmp_path)
    assert "file is not a database" in report["error"]


async def test_cli_json_is_one_document(
    served: Runtime, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--json` prints {"objects": [...]} with the documented keys."""
    assert main(["inspect", str(tmp_path / "data"), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    (shop,) = document["objects"]
    for key in ("namespace", "name", "id", "alarm_at", "operations", "named_alarms", "log"):
        assert key in shop
    assert shop["operations"] == {"failed": 1}


async def test_cli_text_shows_what_failed_and_why(
    served: Runtime, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tables name the object, its failed operation and error, alarms and cursor lag."""
    assert main(["inspect", str(tmp_path / "data"), "SHOPS", "acme"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("SHOPS / acme\n")
    assert "operations: failed 1" in out
    assert "RuntimeError: card declined for inv-1" in out
    assert "renew" in out
    assert "    inv-1 raised at:\n" in out
    assert "    sweep raised at:\n" in out
    assert 'raise LookupError("nothing to sweep")' in out
    assert "mailer" in out
    assert "LAG" in out
    assert "2023-11-15 22:13:20.000Z" in out  # the renew alarm, a day after the start


def test_cli_error_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A path that is not a runtime directory exits 1 with one line on stderr."""
    assert main(["inspect", str(tmp_path / "missing")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("durability inspect: ")


def test_inspect_of_an_empty_runtime_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A runtime directory with no objects yet prints that, and exits 0."""
    (tmp_path / ".lock").touch()
    assert main(["inspect", str(tmp_path)]) == 0
    assert capsys.readouterr().out == "no objects\n"
    assert os.listdir(tmp_path) == [".lock"]


class Fanout(DurableObject):
    """An object with fanout tables holding one owed delivery and one dead letter."""

    def seed(self) -> None:
        migrate(self.ctx.storage, "fanout", FANOUT_MIGRATIONS)
        for row_id, phase, error in (("d1", "delivery", None), ("d2", "dead_letter", "gone")):
            self.ctx.storage.sql.exec(
                "INSERT INTO durability_fanout_deliveries (id, message_key, target_id, seq, "
                "status, phase, attempt, next_attempt_at, last_error, last_error_name, created_at, "
                "generation_id) VALUES (?, 'm', ?, 0, 'pending', ?, 3, 0, ?, ?, 0, 'g')",
                row_id,
                f"target-{row_id}",
                phase,
                error,
                None if error is None else "TargetError",
            )


async def test_fanout_backlog_and_dead_letters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make_runtime: MakeRuntime
) -> None:
    """Owed deliveries count as backlog, dead letters apart; both are listed with errors."""
    async with make_runtime(path=tmp_path, bindings={"FANOUT": Fanout}) as rt:
        await rt.env.FANOUT.get_by_name("topic").seed()
    fanout = _only(tmp_path)["fanout"]
    assert (fanout["backlog"], fanout["dead_letters"]) == (1, 1)
    assert [(d["id"], d["phase"]) for d in fanout["deliveries"]] == [
        ("d2", "dead_letter"),
        ("d1", "delivery"),
    ]
    assert main(["inspect", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "fanout: backlog 1, dead letters 1" in out
    assert "TargetError: gone" in out


async def test_another_process_inspects_a_served_path(served: Runtime, tmp_path: Path) -> None:
    """`python -m durability inspect --json` in another process reads the served files."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "durability",
        "inspect",
        str(tmp_path / "data"),
        "SHOPS",
        "acme",
        "--json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    (shop,) = json.loads(out)["objects"]
    assert (shop["name"], shop["operations"]) == ("acme", {"failed": 1})
