"""`durability check DATA --worker WORKER`: stored pending work checked against new code,
on real data folders written by a runtime, read-only and while a runtime serves them."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import MakeRuntime
from durability.cli import main
from durability.runtime import Runtime
from durability.runtime.server import load_worker
from durability.testing import VirtualClock

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
DAY_MS = 86_400_000
FUTURE_MIGRATION = (
    "INSERT INTO durability_migrations (name, capability, down) VALUES (?, 'fanout', '[]')"
)
"""A history row as a newer library, with a fanout migration this one lacks, writes it."""

BILLING = """
from typing import TypedDict

from durability import Durable, DurabilityFanout, DurableCall, FanoutInput, FanoutTarget
from durability import named_alarm, now_ms, operation, workflow
from durability.runtime import DurableObject, Response


class Charge(TypedDict):
    customer: str
    cents: int


async def audit(messages):
    raise RuntimeError("the audit service is down")


class Billing(Durable, DurableObject):
    def __init__(self, ctx, env):
        super().__init__(ctx, env)
        self.fanout = DurabilityFanout(scheduler=self.scheduler, targets=TARGETS)

    @operation
    async def charge(self, call: DurableCall[Charge]) -> None:
        pass

    @named_alarm
    async def remind(self, info):
        pass

    @named_alarm
    async def renew(self, info):
        pass

    @workflow
    async def onboard(self, event, step):
        await step.sleep("a day", "1 day")

    async def fill(self) -> None:
        await self.charge("inv-1", {"customer": "ann", "cents": 900}, delay_ms=DAY)
        await self.remind(now_ms() + DAY)
        await self.renew.every(DAY, start_at=now_ms() + DAY)
        await self.fanout.enqueue(FanoutInput({"customer": "ann"}, id="m-1"))
        await self.onboard.create(id="w-1", params={"customer": "ann"})


DAY = 86_400_000
TARGETS = {"audit": FanoutTarget(deliver=audit)}
bindings = {"BILLING": Billing}


async def fetch(request, env):
    return Response("ok")
"""


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A data folder written by a runtime serving `billing.py`: one object with a pending
    operation, a named alarm, a recurrence, a fanout delivery and a sleeping workflow
    instance."""
    worker = _write(tmp_path / "v1", BILLING)
    folder = tmp_path / "data"
    _run(_fill(worker, folder))
    for module in [name for name in sys.modules if name.startswith(("billing", "_worker_billing"))]:
        del sys.modules[module]
    return folder


async def _fill(worker: Path, folder: Path) -> None:
    loaded = load_worker(str(worker))
    async with Runtime(path=folder, bindings=loaded.bindings, clock=VirtualClock()) as runtime:
        await runtime.env.BILLING.get_by_name("acme").fill()


def _run(coroutine: Any) -> None:
    import asyncio

    asyncio.run(coroutine)


def _write(folder: Path, source: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "billing.py"
    path.write_text(source)
    return path


def _check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    code = main(["check", *args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out else None


def _kinds(document: Any) -> set[tuple[str, str, str, str]]:
    return {(f["kind"], f["what"], f["handler"], f["id"]) for f in document["findings"]}


def test_the_same_code_finds_nothing(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every pending item has its handler and fits it: exit 0, an empty findings list."""
    worker = _write(tmp_path / "same", BILLING)
    code, document = _check(capsys, str(data), "--worker", str(worker))
    assert (code, document["findings"]) == (0, [])
    assert document["objects"] == 1 and document["pending"] == 5


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ("async def charge(self, call", "async def bill(self, call"),
            ("missing_handler", "operation", "charge", "inv-1"),
        ),
        (
            ("    cents: int\n", "    amount_cents: int\n"),
            ("payload_mismatch", "operation", "charge", "inv-1"),
        ),
        (
            (
                "async def charge(self, call: DurableCall[Charge])",
                "async def charge(self, call, extra)",
            ),
            ("signature_mismatch", "operation", "charge", "inv-1"),
        ),
        (
            ("async def remind(self", "async def nudge(self"),
            ("missing_handler", "named alarm", "remind", "remind"),
        ),
        (
            ("async def renew(self", "async def prolong(self"),
            ("missing_handler", "recurrence", "renew", "renew"),
        ),
        (
            ('{"audit": FanoutTarget', '{"ledger": FanoutTarget'),
            ("missing_handler", "fanout delivery", "audit", "m-1"),
        ),
        (
            ("async def onboard(self", "async def welcome(self"),
            ("missing_handler", "workflow instance", "onboard", "w-1"),
        ),
        (
            ("async def onboard(self, event, step)", "async def onboard(self, event)"),
            ("signature_mismatch", "workflow instance", "onboard", "w-1"),
        ),
    ],
)
def test_a_change_that_strands_stored_work_is_found(
    data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: tuple[str, str],
    expected: tuple[str, str, str, str],
) -> None:
    """A renamed handler, a changed payload shape or signature, a removed target: exit 1
    and a finding naming the namespace, object, handler and id."""
    old, new = change
    assert old in BILLING
    worker = _write(tmp_path / "v2", BILLING.replace(old, new))
    code, document = _check(capsys, str(data), "--worker", str(worker))
    assert code == 1
    assert _kinds(document) == {expected}
    finding = document["findings"][0]
    assert (finding["namespace"], finding["object"]) == ("BILLING", "acme")
    assert len(finding["object_id"]) == 64 and finding["detail"]


def test_an_unbound_namespace_strands_everything(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Renaming the binding leaves every item of its objects, and their alarm, unrun."""
    worker = _write(
        tmp_path / "v2", BILLING.replace('{"BILLING": Billing}', '{"INVOICES": Billing}')
    )
    code, document = _check(capsys, str(data), "--worker", str(worker))
    assert code == 1
    kinds = {f["kind"] for f in document["findings"]}
    assert kinds == {"unbound_namespace"}
    assert {f["what"] for f in document["findings"]} == {
        "operation",
        "named alarm",
        "recurrence",
        "fanout delivery",
        "workflow instance",
        "alarm",
    }


def test_text_output_names_each_finding(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --json: a summary line, then one line per finding."""
    worker = _write(
        tmp_path / "v2", BILLING.replace("async def remind(self", "async def nudge(self")
    )
    assert main(["check", str(data), "--worker", str(worker)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("1 objects, 5 pending items, 1 findings")
    assert lines[1].startswith("  missing_handler: BILLING / acme  named alarm remind remind:")


def test_migrations_newer_than_the_code_are_found_and_missing_ones_listed(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A schema migration the code does not know would be reverted (a finding); three
    would be refused; one the data lacks is listed as what the code would apply."""
    import sqlite3

    file = next((data / "BILLING").glob("*.sqlite3"))
    with sqlite3.connect(file) as connection:
        connection.execute(FUTURE_MIGRATION, ("durability_9001_from_the_future",))
        last = connection.execute(
            "SELECT name FROM durability_migrations WHERE capability = 'namedAlarms' "
            "ORDER BY id DESC"
        ).fetchone()[0]
        connection.execute("DELETE FROM durability_migrations WHERE name = ?", (last,))
    worker = _write(tmp_path / "same", BILLING)
    code, document = _check(capsys, str(data), "--worker", str(worker))
    assert code == 1
    assert _kinds(document) == {
        ("migration_reverts", "migration", "fanout", "durability_9001_from_the_future")
    }
    assert {(m["capability"], tuple(m["migrations"])) for m in document["migrations"]} == {
        ("namedAlarms", (last,))
    }
    with sqlite3.connect(file) as connection:
        for number in (9002, 9003):
            connection.execute(FUTURE_MIGRATION, (f"durability_{number}_from_the_future",))
    code, document = _check(capsys, str(data), "--worker", str(worker))
    assert {f["kind"] for f in document["findings"]} == {"migration_refused"}


@pytest.fixture
def renewals(tmp_path: Path, make_runtime: MakeRuntime) -> Iterator[Path]:
    """A copy of the subscription renewals example with one customer subscribed in its
    state folder (a recurrence pending), as `durability serve` leaves it."""
    project = tmp_path / "subscription_renewals"
    shutil.copytree(
        EXAMPLES / "subscription_renewals", project, ignore=shutil.ignore_patterns(".durability")
    )
    worker = load_worker(str(project))
    state = project / ".durability"
    assert worker.project is not None
    worker.project.prepare(state)

    async def subscribe() -> None:
        async with make_runtime(path=state, bindings=worker.bindings) as runtime:
            await runtime.env.SUBSCRIPTIONS.get_by_name("ann").subscribe("ann", DAY_MS)

    _run(subscribe())
    yield project


def test_the_example_project_with_a_renamed_handler(
    renewals: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the example's own state folder: clean as it is; its recurrence is stranded once
    `renew` is renamed; a migration deleting the class would delete it."""
    state = str(renewals / ".durability")
    code, document = _check(capsys, state, "--worker", str(renewals))
    assert (code, document["findings"]) == (0, [])
    entry = renewals / "src" / "entry.py"
    entry.write_text(entry.read_text().replace("async def renew(self", "async def renewal(self"))
    code, document = _check(capsys, state, "--worker", str(renewals))
    assert code == 1
    assert _kinds(document) == {("missing_handler", "recurrence", "renew", "renew")}
    assert document["findings"][0]["object"] == "ann"


def test_a_class_migration_deleting_objects_with_pending_work(
    renewals: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A wrangler migration that deletes a class is reported with every pending item it
    would take along; nothing is deleted by the check."""
    config = renewals / "wrangler.jsonc"
    text = config.read_text()
    text = text.replace('{ "name": "SUBSCRIPTIONS", "class_name": "Subscription" },\n', "")
    text = text.replace(
        '"migrations": [{ "tag": "v1", "new_sqlite_classes": ["Subscription", "Payments"] }]',
        '"migrations": [{ "tag": "v1", "new_sqlite_classes": ["Subscription", "Payments"] },'
        ' { "tag": "v2", "deleted_classes": ["Subscription"] }]',
    )
    config.write_text(text)
    state = renewals / ".durability"
    code, document = _check(capsys, str(state), "--worker", str(renewals))
    assert code == 1
    assert {f["kind"] for f in document["findings"]} == {"objects_deleted"}
    assert (state / "SUBSCRIPTIONS").is_dir()


def test_check_reads_a_folder_a_runtime_is_serving_without_changing_it(
    data: Path, tmp_path: Path, make_runtime: MakeRuntime
) -> None:
    """Run as a command while a runtime holds the folder: it answers, and not a byte of
    the data changes."""
    worker = _write(
        tmp_path / "v2", BILLING.replace("async def remind(self", "async def nudge(self")
    )
    answers: list[subprocess.CompletedProcess[str]] = []
    digests: list[str] = []

    async def while_serving() -> None:
        loaded = load_worker(str(_write(tmp_path / "serving", BILLING)))
        async with make_runtime(path=data, bindings=loaded.bindings):
            digests.append(_digest(data))
            command = [sys.executable, "-m", "durability", "check", str(data), "--worker"]
            answers.append(
                subprocess.run(
                    [*command, str(worker), "--json"], capture_output=True, text=True, timeout=120
                )
            )
            digests.append(_digest(data))

    _run(while_serving())
    done = answers[0]
    assert done.returncode == 1, done.stderr
    assert _kinds(json.loads(done.stdout)) == {
        ("missing_handler", "named alarm", "remind", "remind")
    }
    assert digests[0] == digests[1]


def _digest(folder: Path) -> str:
    """The names and bytes of the databases and other data files under `folder` (SQLite's
    own -wal and -shm files, which any reader of a WAL database may create, aside)."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.name.endswith(("-wal", "-shm")):
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["check", "missing-folder", "--worker", "x.py"], "no such directory"),
        (["check", "{data}", "--worker", "{tmp}/nothing.py"], "worker module file not found"),
        (["check", "{tmp}", "--worker", "{worker}"], "not a durability runtime directory"),
    ],
)
def test_bad_arguments_exit_2(
    data: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    arguments: list[str],
    message: str,
) -> None:
    """A folder that is missing or no runtime's, or a worker that does not load: exit 2
    and one line on stderr."""
    empty = tmp_path / "empty"
    empty.mkdir()
    worker = _write(tmp_path / "w", BILLING)
    filled = [a.format(data=data, tmp=empty, worker=worker) for a in arguments]
    assert main(filled) == 2
    assert message in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        main(["check", str(data)])
    assert usage.value.code == 2
