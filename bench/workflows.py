"""Workflows: steps per second and create-to-complete latency, beside DBOS in the same run.

    python bench/workflows.py [--steps 500] [--instances 100] [--objects 20] [--samples 200]
                              [--no-dbos] [--dir DIR]

Everything runs on real files and the real clock, every commit synced (durability: WAL,
`synchronous=FULL`; DBOS: its SQLite system database, whose default `synchronous=FULL`
syncs every commit too):

- steps/s, one instance: one workflow of `--steps` no-op steps, one after another;
- steps/s, one object: `--instances` instances of a 10-step workflow at once, in one
  object (one SQLite file);
- steps/s, many objects: the same spread over `--objects` objects;
- create-to-complete latency of a 3-step workflow, `--samples` times one after another:
  from `create()` until `status()` says complete (polled every 0.2 ms), p50 and p99.

DBOS runs the same shapes with the same steps: one workflow of `--steps` steps, then
`--instances` 10-step workflows started at once (`DBOS.start_workflow`), then
`--samples` 3-step workflows one after another, each from `start_workflow` to
`get_result()`. DBOS is in the `bench` extra; `--no-dbos` leaves it out.
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

from durability import Durable, workflow
from durability.runtime import DurableObject, Runtime

POLL_S = 0.0002


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

    async def status(self, name: str, instance_id: str) -> str:
        instance = await getattr(self, name).get(instance_id)
        return str((await instance.status())["status"])


async def _until_complete(stub: Any, name: str, instance_id: str) -> None:
    while await stub.status(name, instance_id) != "complete":
        await asyncio.sleep(POLL_S)


async def durability_figures(directory: Path, args: argparse.Namespace) -> dict[str, float]:
    """The four measures on this runtime."""
    figures: dict[str, float] = {}
    async with Runtime(path=directory / "durability", bindings={"FLOWS": Flows}) as rt:
        stub = rt.env.FLOWS.get_by_name("one")
        began = time.perf_counter()
        await stub.start("chain", "long", args.steps)
        await _until_complete(stub, "chain", "long")
        figures["one instance"] = args.steps / (time.perf_counter() - began)

        for label, count in (("one object", 1), ("many objects", args.objects)):
            tag = label.replace(" ", "-")
            stubs = [rt.env.FLOWS.get_by_name(f"{tag}-{n}") for n in range(count)]
            ids = [(stubs[i % count], f"{tag}-{i}") for i in range(args.instances)]
            began = time.perf_counter()
            await asyncio.gather(*(target.start("chain", i, 10) for target, i in ids))
            await asyncio.gather(*(_until_complete(target, "chain", i) for target, i in ids))
            figures[label] = 10 * args.instances / (time.perf_counter() - began)

        latencies = []
        for sample in range(args.samples):
            began = time.perf_counter()
            await stub.start("three", f"three-{sample}", 3)
            await _until_complete(stub, "three", f"three-{sample}")
            latencies.append((time.perf_counter() - began) * 1000)
        figures["p50 ms"], figures["p99 ms"] = _percentiles(latencies)
    return figures


def dbos_figures(directory: Path, args: argparse.Namespace) -> dict[str, float]:
    """The same four measures on DBOS with a SQLite system database."""
    import logging

    from dbos import DBOS

    logging.getLogger("dbos").setLevel(logging.WARNING)
    DBOS(
        config={
            "name": "bench-workflows",
            "system_database_url": f"sqlite:///{directory / 'dbos.sqlite'}",
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
        DBOS.destroy()
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


def report(ours: dict[str, float], theirs: dict[str, float] | None) -> str:
    """The table: each measure for durability, DBOS, and how many times DBOS's it is."""
    lines = [f"{'measure':<46} {'durability':>12} {'DBOS':>12} {'ratio':>8}"]
    for key, label, shown in ROWS:
        other = "" if theirs is None else shown(theirs[key])
        ratio = ""
        if theirs is not None and theirs[key] and ours[key]:
            better = ours[key] / theirs[key] if "steps" in label else theirs[key] / ours[key]
            ratio = f"{better:.1f}x"
        lines.append(f"{label:<46} {shown(ours[key]):>12} {other:>12} {ratio:>8}")
    lines.append("(ratio: how many times better durability is: more steps/s, less latency)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=500, help="steps of the one long instance")
    parser.add_argument("--instances", type=int, default=100, help="10-step instances at once")
    parser.add_argument("--objects", type=int, default=20, help="objects they are spread over")
    parser.add_argument("--samples", type=int, default=200, help="3-step workflows timed")
    parser.add_argument("--no-dbos", action="store_true", help="leave DBOS out")
    parser.add_argument("--dir", type=Path, default=None, help="where the files go")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
        directory = Path(scratch)
        ours = asyncio.run(durability_figures(directory, args))
        theirs = None if args.no_dbos else dbos_figures(directory, args)
    print(report(ours, theirs))


if __name__ == "__main__":
    main()
