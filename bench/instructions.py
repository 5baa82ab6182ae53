"""CPU per operation counted in instructions (valgrind), not seconds: the same on a busy
machine as on a quiet one.

    python bench/instructions.py [--operations 2000] [--against REV]

This machine's CPU speed swings by 2x or more from one minute to the next, so a timed
CPU figure measured now cannot be compared with one measured an hour ago. valgrind's
callgrind counts the instructions a process executes, which for the same code and
inputs is the same number every time. Each workload runs in a child process under
callgrind twice, with N and 2N operations; the difference divided by N is what one
more operation costs, start-up and imports left out.

Rows: raw sqlite3 in memory doing the row work of an operation (insert, claim, complete)
with one commit per operation and with ten per commit; the embedded runtime's floor (a
stub call inserting one row); the least work of an operation through the runtime, with
no engine (`LeanOperations` claiming a turn's records in its commit, as the engine
does), and the same with the work the API forces per operation (`ApiOperations`); and
durable operations on the in-memory runtime, register -> completed, with 200
callers and the default 10 permits, then with 100 permits. The library rows run on a
virtual clock that stands still, so what the engine decides by time (how long handlers
run back to back) is the same under valgrind, 50 times slower, as at full speed.
`--against REV` measures the durability rows a second time with the library as it was
at git revision REV (checked out into a temporary worktree), in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from operations import (
    CREATE_CALLS,
    ApiOperations,
    InsertFloor,
    LeanOperations,
    OperationsBench,
    raw_row_work,
    register_all,
    settings,
)

from durability.runtime import DurableObject, Runtime
from durability.testing import VirtualClock

HERE = Path(__file__).resolve().parent
CALLERS = 200
WORKLOADS = {
    "raw-1": "raw sqlite3 (in memory): insert, claim, complete; 1 commit per op",
    "raw-10": "raw sqlite3 (in memory): the same, 10 ops per commit",
    "floor": "in-memory runtime: a stub call inserting one row (the floor)",
    "lean-all": "in-memory runtime: the least work of an operation on it, no engine, "
    f"{CALLERS} callers, a turn's records claimed by its commit (LeanOperations, claim_all)",
    "api": "in-memory runtime: the same with the work the API forces per operation (ApiOperations)",
    "ops-10": f"durability: register -> completed, {CALLERS} callers, alarm_concurrency=10",
    "ops-100": f"durability: register -> completed, {CALLERS} callers, alarm_concurrency=100",
}
LIBRARY = ("floor", "lean-all", "api", "ops-10", "ops-100")


def raw(operations: int, per_commit: int) -> None:
    """The row work of `operations` operations on an in-memory database."""
    connection = sqlite3.connect(":memory:", isolation_level=None)
    connection.execute(CREATE_CALLS)
    raw_row_work(connection, operations, per_commit)
    (done,) = connection.execute("SELECT COUNT(*) FROM calls WHERE status = 'completed'").fetchone()
    assert done == operations, (done, operations)


async def library(binding: type[DurableObject], operations: int, permits: int) -> None:
    """`operations` register calls of CALLERS callers on one in-memory object (for
    operations: until every one is completed)."""
    settings.alarm_concurrency = permits
    counted = binding is not InsertFloor
    # A clock that stands still: what the engine decides by time (how long a slice of
    # handlers runs back to back) is then the same under valgrind as at full speed.
    async with Runtime(bindings={"OBJ": binding}, clock=VirtualClock()) as rt:
        bench = rt.env.OBJ.get_by_name("cpu")
        if counted:
            await bench.expect(operations)
        await register_all(bench.register, operations, CALLERS)
        if counted:
            assert await bench.wait_completed() == operations


def child(workload: str, operations: int) -> None:
    """Run one workload in this process (what callgrind counts)."""
    if workload.startswith("raw-"):
        raw(operations, int(workload.removeprefix("raw-")))
    elif workload == "floor":
        asyncio.run(library(InsertFloor, operations, 10))
    elif workload == "lean-all":
        settings.claim_all = True
        asyncio.run(library(LeanOperations, operations, 10))
    elif workload == "api":
        asyncio.run(library(ApiOperations, operations, 10))
    else:
        asyncio.run(library(OperationsBench, operations, int(workload.removeprefix("ops-"))))


def instructions(workload: str, operations: int, source: Path | None) -> int:
    """The instructions a child process running `workload` executes in all."""
    environment = dict(os.environ)
    # String hashing is randomized per process, which moves dict probing and so the
    # count by a thousand or more per operation: one seed for every run.
    environment["PYTHONHASHSEED"] = "0"
    if source is not None:
        environment["PYTHONPATH"] = str(source)
    with tempfile.TemporaryDirectory() as scratch:
        completed = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={scratch}/out",
                sys.executable,
                str(HERE / "instructions.py"),
                "--child",
                workload,
                "--operations",
                str(operations),
            ],
            capture_output=True,
            text=True,
            env=environment,
            check=False,
        )
    found = re.search(r"Collected : (\d+)", completed.stderr)
    if completed.returncode != 0 or found is None:
        raise RuntimeError(f"{workload} under valgrind failed:\n{completed.stderr[-2000:]}")
    return int(found.group(1))


def per_operation(workload: str, operations: int, source: Path | None = None) -> float:
    """Instructions one more operation costs: (I(2N) - I(N)) / N."""
    once = instructions(workload, operations, source)
    twice = instructions(workload, 2 * operations, source)
    return (twice - once) / operations


def checkout(revision: str, into: Path) -> Path:
    """The `src` directory of `revision`, checked out into a detached worktree."""
    subprocess.run(
        ["git", "worktree", "add", "--detach", "--quiet", str(into), revision],
        cwd=HERE,
        check=True,
    )
    return into / "src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--operations", type=int, default=2_000, help="N (runs N and 2N)")
    parser.add_argument("--against", metavar="REV", help="also measure git revision REV")
    parser.add_argument("--child", choices=sorted(WORKLOADS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.operations)
        return
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (Debian: apt-get install valgrind)")
    results = {name: per_operation(name, args.operations) for name in WORKLOADS}
    against: dict[str, float] = {}
    if args.against:
        scratch = Path(tempfile.mkdtemp())
        try:
            source = checkout(args.against, scratch / "tree")
            against = {name: per_operation(name, args.operations, source) for name in LIBRARY}
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(scratch / "tree")],
                cwd=HERE,
                check=False,
            )
            shutil.rmtree(scratch, ignore_errors=True)
    print(f"Python {sys.version.split()[0]}, SQLite {sqlite3.sqlite_version}, valgrind callgrind")
    print()
    header = "| workload | instructions per op | vs raw, 1 commit per op |"
    rule = "|---|---:|---:|"
    if against:
        header += f" at {args.against} | change |"
        rule += "---:|---:|"
    print(header)
    print(rule)
    for name, label in WORKLOADS.items():
        cost = results[name]
        line = f"| {label} | {cost:,.0f} | {cost / results['raw-1']:.1f}x |"
        if against:
            before = against.get(name)
            line += " | |" if before is None else f" {before:,.0f} | {cost / before - 1:+.1%} |"
        print(line)


if __name__ == "__main__":
    main()
