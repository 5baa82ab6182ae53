"""The least-work models of bench/operations.py and bench/least_work.py do the work they
stand for: every registration answered, every record claimed exactly once and completed,
never more attempts at once than the permits (they are measured as what goal 1's
workload costs with nothing but its guarantees: one that skipped work would measure
nothing). Sizes are small; nothing here is timed."""

from __future__ import annotations

import asyncio
import importlib.util
import sqlite3
import sys
from itertools import pairwise
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


def _load(name: str, file: str) -> ModuleType:
    """bench/`file` as module `name` (bench/ is not put on the path: its module names
    would shadow others)."""
    path = Path(__file__).resolve().parent.parent / "bench" / file
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up while built
    spec.loader.exec_module(module)
    return module


least_work = _load("least_work", "least_work.py")  # bench/operations.py imports it
contract_floor = _load("contract_floor", "contract_floor.py")  # so is this one
bench = _load("bench_operations", "operations.py")

OPERATIONS = 300
CALLERS = 40
PERMITS = 10


def _rows(file: Path) -> list[tuple[Any, ...]]:
    connection = sqlite3.connect(file)
    try:
        return connection.execute(
            "SELECT status, attempt, completed_at IS NOT NULL FROM durability_calls"
        ).fetchall()
    finally:
        connection.close()


def _assert_all_completed_once(rows: list[tuple[Any, ...]]) -> None:
    assert len(rows) == OPERATIONS
    assert set(rows) == {("completed", 1, 1)}


def _watch_permits(work: Any, seen: list[int]) -> None:
    """Record, at every turn, how many attempts hold a permit (claimed, not yet written)."""
    write = work.write

    def counted(*args: Any) -> Any:
        turn = write(*args)
        seen.append(bench.settings.alarm_concurrency - work.permits)
        return turn

    work.write = counted


@pytest.mark.parametrize("threaded", [False, True], ids=["sync-on-loop", "sync-in-thread"])
def test_bare_operations_complete_every_record_once(tmp_path: Path, threaded: bool) -> None:
    file = tmp_path / "bare.sqlite3"
    held: list[int] = []
    original = bench.LeanWork.__init__

    def watched(self: Any, permits: int, chunk: int, claim_all: bool = False) -> None:
        original(self, permits, chunk, claim_all)
        _watch_permits(self, held)

    bench.settings.alarm_concurrency = PERMITS
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bench.LeanWork, "__init__", watched)
        asyncio.run(bench.bench_bare(file, OPERATIONS, CALLERS, PERMITS, threaded=threaded))
    _assert_all_completed_once(_rows(file))
    assert max(held) == PERMITS
    assert all(0 <= count <= PERMITS for count in held)


def test_bare_operations_answer_callers_only_once_synced(tmp_path: Path) -> None:
    """A registration's caller and a claim's handler wait for an fdatasync made after the
    commit that wrote them."""
    events: list[str] = []
    file = tmp_path / "bare.sqlite3"

    async def run() -> None:
        schema = await bench.calls_schema()
        bare = bench.BareOperations(file, schema, PERMITS, threaded=False)
        bare.completions.expect(3)
        connection_commit = bare._commit

        def commit() -> None:
            events.append("commit")
            connection_commit()

        bare._commit = commit
        sync = bench.os.fdatasync

        def recorded_sync(descriptor: int) -> None:
            sync(descriptor)
            events.append("sync")

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(bench.os, "fdatasync", recorded_sync)
            registered = [asyncio.create_task(bare.call(f"op-{n}")) for n in range(3)]
            for task in registered:
                task.add_done_callback(lambda _: events.append("answered"))
            await asyncio.gather(*registered)
            await bare.completions.done.wait()
        assert bare.close() == 3

    asyncio.run(run())
    assert events.index("commit") < events.index("sync") < events.index("answered")


async def test_lean_operations_complete_every_record_once() -> None:
    bench.settings.alarm_concurrency = PERMITS
    async with bench.Runtime(bindings={"OPS": bench.LeanOperations}) as rt:
        lean = rt.env.OPS.get_by_name("lean")
        await lean.expect(OPERATIONS)
        await bench.register_all(lean.register, OPERATIONS, CALLERS)
        assert await lean.wait_completed() == OPERATIONS
        schema = await lean.schema()
    assert schema[0].startswith("CREATE TABLE")
    assert any("durability_calls_due_idx" in statement for statement in schema)


class _RecordedApiOperations(bench.ApiOperations):  # type: ignore[name-defined]
    """`ApiOperations` keeping what each handler run was given."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.seen: list[list[Any]] = []

    def _noop(self, call: Any) -> None:
        self.seen.append([call.id, call.operation, call.attempt, call.signal.aborted])
        super()._noop(call)

    async def handled(self) -> list[list[Any]]:
        return self.seen

    async def stored(self) -> list[list[Any]]:
        rows = self.ctx.storage.sql.exec(
            "SELECT status, attempt, completed_at IS NOT NULL FROM durability_calls"
        )
        return [list(row) for row in rows.raw()]


async def test_api_operations_run_each_handler_once_with_its_call(tmp_path: Path) -> None:
    bench.settings.alarm_concurrency = PERMITS
    async with bench.Runtime(path=tmp_path, bindings={"OPS": _RecordedApiOperations}) as rt:
        api = rt.env.OPS.get_by_name("api")
        await api.expect(OPERATIONS)
        await bench.register_all(api.register, OPERATIONS, CALLERS)
        assert await api.wait_completed() == OPERATIONS
        seen = await api.handled()
        stored = await api.stored()
        with pytest.raises(TypeError, match="id must be a string"):
            await api.register(7)
    assert sorted(seen) == sorted([f"op-{n}", "noop", 1, False] for n in range(OPERATIONS))
    _assert_all_completed_once([tuple(row) for row in stored])


def test_raw_table_row_work_completes_every_record_once_a_batch_per_commit(tmp_path: Path) -> None:
    """Raw row work on the engine's table: every record completed once, in one commit per
    permit batch plus the last batch's successes (no more operations per commit than a
    claim durable before its handler allows)."""
    file = tmp_path / "raw-table.sqlite3"
    commits: list[int] = []
    original = bench.LeanWork.write

    def counted(self: Any, execute: Any, now: int) -> Any:
        commits.append(len(self.rows))
        return original(self, execute, now)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bench.LeanWork, "write", counted)
        asyncio.run(bench.bench_raw_table(file, OPERATIONS, PERMITS))
    _assert_all_completed_once(_rows(file))
    assert len(commits) == OPERATIONS // PERMITS + 1
    assert max(commits) == PERMITS


def _least_rows(file: Path) -> list[tuple[Any, ...]]:
    connection = sqlite3.connect(file)
    try:
        return connection.execute("SELECT status, attempt, result FROM calls").fetchall()
    finally:
        connection.close()


@pytest.mark.parametrize("sync_threads", [0, 1, 4], ids=["sync-on-loop", "1-thread", "4-threads"])
def test_least_work_completes_every_record_once_within_its_permits(
    tmp_path: Path, sync_threads: int
) -> None:
    file = tmp_path / "least.sqlite3"
    held: list[int] = []
    original = least_work.LeastWork._write

    def watched(self: Any) -> None:
        original(self)
        held.append(PERMITS - self.permits)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(least_work.LeastWork, "_write", watched)
        asyncio.run(least_work.bench_least(file, OPERATIONS, CALLERS, PERMITS, sync_threads))
    rows = _least_rows(file)
    assert len(rows) == OPERATIONS
    assert set(rows) == {("completed", 1, "null")}
    assert max(held) == PERMITS
    assert all(0 <= count <= PERMITS for count in held)


class _CountingConnection:
    """A connection that numbers its commits and notes, for every id, the commit that
    registered it and the commit that claimed it."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection
        self.commits = 0
        self.registered: dict[str, int] = {}
        self.claimed: dict[str, int] = {}

    def execute(self, statement: str, bindings: Any = ()) -> Any:
        next_commit = self.commits + 1
        if statement.startswith("INSERT"):
            for id in bindings:
                self.registered[id] = next_commit
            if "'pending', 1)" in statement:
                for id in bindings:
                    self.claimed[id] = next_commit
        elif "SET attempt = 1" in statement:
            for id in bindings:
                self.claimed[id] = next_commit
        cursor = self.connection.execute(statement, bindings)
        if statement == "COMMIT":
            self.commits = next_commit
        return cursor

    def close(self) -> None:
        self.connection.close()


@pytest.mark.parametrize("sync_threads", [0, 4], ids=["sync-on-loop", "4-threads"])
def test_least_work_answers_and_runs_only_what_a_later_sync_covered(
    tmp_path: Path, sync_threads: int
) -> None:
    """A registration's caller, and a claim's handler, wait until an fdatasync that began
    after the commit that wrote them has ended."""
    file = tmp_path / "least.sqlite3"
    covered: list[int] = [0]  # per finished sync: the commits made before it began
    answered: dict[str, int] = {}
    handled: dict[str, int] = {}
    sync = least_work.os.fdatasync

    async def run() -> None:
        least = least_work.LeastWork(file, PERMITS, sync_threads)
        least.target = OPERATIONS
        connection = least.connection = _CountingConnection(least.connection)
        durable = least._durable

        def recorded_sync(descriptor: int) -> None:
            begun = connection.commits
            sync(descriptor)
            covered.append(begun)

        def recorded_durable(turns: list[Any]) -> None:
            for _, claimed in turns:
                for id in claimed:
                    handled[id] = max(covered)
            durable(turns)

        least._durable = recorded_durable

        async def register(id: str) -> None:
            await least.register(id)
            answered[id] = max(covered)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(least_work.os, "fdatasync", recorded_sync)
            await asyncio.gather(*(register(f"op-{n}") for n in range(OPERATIONS)))
            await least.done.wait()
            while least.syncing:
                await asyncio.sleep(0.001)
        assert least.close() == OPERATIONS
        assert set(answered) == set(connection.registered)
        assert set(handled) == set(connection.claimed) == set(answered)
        assert all(answered[id] >= connection.registered[id] for id in answered)
        assert all(handled[id] >= connection.claimed[id] for id in handled)

    asyncio.run(run())


def test_contract_floor_turns_complete_each_claim_in_the_next_commit() -> None:
    records = [(f"op-{n}", f"g-{n}") for n in range(25)]
    turns = list(contract_floor.turns(records, PERMITS))
    claimed = [record for claiming, _ in turns for record in claiming]
    completed = [record for _, completing in turns for record in completing]
    assert claimed == completed == records
    assert all(len(claiming) <= PERMITS for claiming, _ in turns)
    for (claiming, _), (_, completing) in pairwise(turns):
        assert completing == claiming


@pytest.mark.parametrize(
    ("groups", "ahead"),
    [(1, False), (1, True), (2, False), (5, True), (10, False)],
    ids=["1-group", "1-group-ahead", "2-groups", "5-groups-ahead", "10-groups"],
)
def test_contract_floor_completes_every_record_once_a_sync_per_commit(
    tmp_path: Path, groups: int, ahead: bool
) -> None:
    """Every record claimed and completed once, and one fdatasync for every commit: the
    permits' turns, plus the registrations ahead in commits of `AHEAD_PER_COMMIT`."""
    file = tmp_path / "floor.sqlite3"
    syncs: list[int] = []
    sync = contract_floor.os.fdatasync

    def counted(descriptor: int) -> None:
        sync(descriptor)
        syncs.append(descriptor)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(contract_floor.os, "fdatasync", counted)
        patch.setattr(contract_floor, "AHEAD_PER_COMMIT", 7)
        contract_floor.floor_seconds(file, OPERATIONS, PERMITS, groups, ahead=ahead)
    _assert_all_completed_once(_rows(file))
    per_group = OPERATIONS // groups
    turns = -(-per_group // (PERMITS // groups)) + 1
    registrations = -(-per_group // 7) if ahead else 0
    assert len(syncs) == groups * (turns + registrations)


def test_contract_floor_groups_must_divide_the_permits(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="groups must divide permits"):
        contract_floor.floor_seconds(tmp_path / "floor.sqlite3", OPERATIONS, PERMITS, 3)
