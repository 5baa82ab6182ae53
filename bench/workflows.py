"""Workflows: steps per second and create-to-complete latency, beside DBOS and beside
raw sqlite3 making only the synced commits the guarantee forces, in the same run.

    python bench/workflows.py [--steps 500] [--instances 100] [--objects 20] [--samples 200]
                              [--rounds 3] [--no-dbos] [--dir DIR]

Everything runs on real files and the real clock, every commit synced (durability: WAL,
each commit's log synced before it is acknowledged, as `synchronous=FULL` does; DBOS:
its SQLite system database with SQLite's defaults, a rollback journal and
`synchronous=FULL`, read back from DBOS's own connection and printed; DBOS (WAL): the
same file switched to WAL first, as durability's files are, `synchronous=FULL`):

- steps/s, one instance: one workflow of `--steps` no-op steps, one after another;
- steps/s, one object: `--instances` instances of a 10-step workflow at once, in one
  object (one SQLite file);
- steps/s, many objects: the same spread over `--objects` objects;
- create-to-complete latency of a 3-step workflow, `--samples` times one after another:
  from `create()` until `status()` says complete (polled every 0.2 ms), p50 and p99.

Each system first runs one workflow untimed (the object or the database is made then).
The steps/s runs wait for their instances one at a time, polling every millisecond (a
poller per instance would load the loop it measures). DBOS runs the same shapes with
the same steps: one workflow of `--steps` steps, then `--instances` 10-step workflows
started at once (`DBOS.start_workflow`), then `--samples` 3-step workflows one after
another, each from `start_workflow` to `get_result()`. DBOS is in the `bench` extra;
`--no-dbos` leaves it out.

The floor is raw sqlite3 (WAL, `synchronous=FULL`, one connection, no Python around
it but the loop) making only the commits the guarantee forces, each synced: a create
(the instance and its first step's start), then per step its result with the next
step's start (the last with the instance complete). Nothing runs a step's code, reads
a journal or polls: no engine can do less on this disk.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from workflows_floor import floor_figures

from durability import Durable, workflow
from durability.runtime import DurableObject, Runtime

POLL_S = 0.0002
"""How often the latency runs poll `status()`."""

THROUGHPUT_POLL_S = 0.001
"""How often the steps/s runs poll the instance they wait for."""


class Flows(Durable, DurableObject):
    """`chain`: `steps` no-op steps; `three`: three steps."""

    scheduler_options: ClassVar[dict[str, Any]] = {"alarm_concurrency": 100}

    @workflow
    async def chain(self, event: Any, step: Any) -> int:
        def numbered(number: int) -> Any:
            @step.do(f"step {number}")
            def one() -> int:
                return number

            return one

        total = 0
        for number in range(event.payload["steps"]):
            total += await numbered(number)()
        return total

    @workflow
    async def three(self, event: Any, step: Any) -> int:
        @step.do()
        def first() -> int:
            return 1

        @step.do()
        def second(first: int) -> int:
            return first + 1

        @step.do()
        def third(second: int) -> int:
            return second + 1

        return await third()

    async def start(self, name: str, instance_id: str, steps: int) -> None:
        await getattr(self, name).create(id=instance_id, params={"steps": steps})

    async def ready(self) -> None:
        """Nothing: the call makes the object, and its tables, before a clock starts."""

    async def status(self, name: str, instance_id: str) -> str:
        instance = await getattr(self, name).get(instance_id)
        return str((await instance.status())["status"])


async def _until_complete(stub: Any, name: str, instance_id: str, every: float = POLL_S) -> None:
    while await stub.status(name, instance_id) != "complete":
        await asyncio.sleep(every)


async def durability_figures(directory: Path, args: argparse.Namespace) -> dict[str, float]:
    """The four measures on this runtime."""
    figures: dict[str, float] = {}
    async with Runtime(path=directory / "durability", bindings={"FLOWS": Flows}) as rt:
        stub = rt.env.FLOWS.get_by_name("one")
        await stub.start("three", "warm-up", 3)
        await _until_complete(stub, "three", "warm-up")
        began = time.perf_counter()
        await stub.start("chain", "long", args.steps)
        await _until_complete(stub, "chain", "long", THROUGHPUT_POLL_S)
        figures["one instance"] = args.steps / (time.perf_counter() - began)

        for label, count in (("one object", 1), ("many objects", args.objects)):
            tag = label.replace(" ", "-")
            stubs = [rt.env.FLOWS.get_by_name(f"{tag}-{n}") for n in range(count)]
            await asyncio.gather(*(target.ready() for target in stubs))
            ids = [(stubs[i % count], f"{tag}-{i}") for i in range(args.instances)]
            began = time.perf_counter()
            await asyncio.gather(*(target.start("chain", i, 10) for target, i in ids))
            for target, i in ids:
                await _until_complete(target, "chain", i, THROUGHPUT_POLL_S)
            figures[label] = 10 * args.instances / (time.perf_counter() - began)

        latencies = []
        for sample in range(args.samples):
            began = time.perf_counter()
            await stub.start("three", f"three-{sample}", 3)
            await _until_complete(stub, "three", f"three-{sample}")
            latencies.append((time.perf_counter() - began) * 1000)
        figures["p50 ms"], figures["p99 ms"] = _percentiles(latencies)
    return figures


def dbos_figures(directory: Path, args: argparse.Namespace, wal: bool) -> dict[str, float]:
    """The same four measures on DBOS with a SQLite system database (`wal`: switched to
    WAL first); prints the journal mode and `synchronous` its connections use."""
    import logging
    import sqlite3

    from dbos import DBOS

    logging.getLogger("dbos").setLevel(logging.WARNING)
    database = directory / f"dbos-{'wal' if wal else 'default'}.sqlite"
    if wal:
        # The journal mode is kept in the file: every connection DBOS opens uses it.
        with sqlite3.connect(database) as connection:
            connection.execute("PRAGMA journal_mode=WAL")
    dbos = DBOS(
        config={
            "name": "bench-workflows",
            "system_database_url": f"sqlite:///{database}",
            "log_level": "WARNING",
        }
    )

    @DBOS.step()
    def one(number: int) -> int:
        return number

    @DBOS.workflow()
    def chain(steps: int) -> int:
        return sum(one(number) for number in range(steps))

    @DBOS.workflow()
    def three() -> int:
        return one(1) + one(1) + one(1)

    DBOS.launch()
    figures: dict[str, float] = {}
    try:
        with dbos._sys_db.engine.connect() as connection:
            mode = connection.exec_driver_sql("PRAGMA journal_mode").scalar()
            synchronous = connection.exec_driver_sql("PRAGMA synchronous").scalar()
        print(f"DBOS{' (WAL)' if wal else ''}: journal_mode={mode}, synchronous={synchronous}")
        DBOS.start_workflow(three).get_result()
        began = time.perf_counter()
        DBOS.start_workflow(chain, args.steps).get_result()
        figures["one instance"] = args.steps / (time.perf_counter() - began)
        began = time.perf_counter()
        handles = [DBOS.start_workflow(chain, 10) for _ in range(args.instances)]
        for handle in handles:
            handle.get_result()
        figures["one object"] = figures["many objects"] = (
            10 * args.instances / (time.perf_counter() - began)
        )
        latencies = []
        for _ in range(args.samples):
            began = time.perf_counter()
            DBOS.start_workflow(three).get_result()
            latencies.append((time.perf_counter() - began) * 1000)
        figures["p50 ms"], figures["p99 ms"] = _percentiles(latencies)
    finally:
        DBOS.destroy(destroy_registry=True)  # the next round registers its own functions
    return figures


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered), p99


ROWS: list[tuple[str, str, Callable[[float], str]]] = [
    ("one instance", "steps/s, one instance of --steps steps", lambda v: f"{v:,.0f}"),
    ("one object", "steps/s, --instances x 10 steps, one object", lambda v: f"{v:,.0f}"),
    ("many objects", "steps/s, the same over --objects objects", lambda v: f"{v:,.0f}"),
    ("p50 ms", "3-step workflow, create -> complete, p50 ms", lambda v: f"{v:.2f}"),
    ("p99 ms", "3-step workflow, create -> complete, p99 ms", lambda v: f"{v:.2f}"),
]

OURS = "durability"
RATIOS = (("vs DBOS", "DBOS"), ("vs WAL", "DBOS (WAL)"), ("of floor", "floor"))
"""Ratio columns: durability against each other column (the floor's: the share of it)."""


def _better(label: str, ours: float, theirs: float) -> float:
    """How many times better `ours` is: more steps/s, or less latency."""
    return ours / theirs if "steps" in label else theirs / ours


def report(columns: dict[str, dict[str, float]]) -> str:
    """The table: each measure for every system, and durability's ratios."""
    names = list(columns)
    ratios = [(title, other) for title, other in RATIOS if other in columns]
    head = f"{'measure':<46}" + "".join(f" {n:>12}" for n in names)
    lines = [head + "".join(f" {title:>9}" for title, _ in ratios)]
    for key, label, shown in ROWS:
        line = f"{label:<46}" + "".join(
            f" {shown(columns[n][key]) if key in columns[n] else '':>12}" for n in names
        )
        for _, other in ratios:
            theirs, ours = columns[other].get(key), columns[OURS][key]
            text = f"{_better(label, ours, theirs):.2f}x" if theirs and ours else ""
            line += f" {text:>9}"
        lines.append(line)
    lines.append(
        "(ratios: how many times better durability is, more steps/s or less latency; "
        "of floor: the share of the floor it reaches)"
    )
    return "\n".join(lines)


def one_round(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Every system once, in one scratch directory."""
    with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
        directory = Path(scratch)
        columns = {OURS: asyncio.run(durability_figures(directory, args))}
        columns["floor"] = floor_figures(
            directory, args.steps, args.instances, args.samples, _percentiles
        )
        if not args.no_dbos:
            columns["DBOS"] = dbos_figures(directory, args, wal=False)
            columns["DBOS (WAL)"] = dbos_figures(directory, args, wal=True)
    return columns


def medians(rounds: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Each figure's median over the rounds."""
    return {
        name: {key: statistics.median(r[name][key] for r in rounds) for key in figures}
        for name, figures in rounds[0].items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=500, help="steps of the one long instance")
    parser.add_argument("--instances", type=int, default=100, help="10-step instances at once")
    parser.add_argument("--objects", type=int, default=20, help="objects they are spread over")
    parser.add_argument("--samples", type=int, default=200, help="3-step workflows timed")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the table shows medians")
    parser.add_argument("--no-dbos", action="store_true", help="leave DBOS out")
    parser.add_argument("--dir", type=Path, default=None, help="where the files go")
    args = parser.parse_args()
    rounds = []
    for number in range(args.rounds):
        rounds.append(one_round(args))
        if args.rounds > 1:
            print(f"round {number + 1}:\n{report(rounds[-1])}\n")
    print(report(medians(rounds)))


if __name__ == "__main__":
    main()
