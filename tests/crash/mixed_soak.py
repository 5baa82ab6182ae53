"""The mixed-workload crash soak: kill the child again and again, then check everything.

`soak(workdir, kills, seed)` runs `mixed_child.py` on one data path `kills` times, each
SIGKILLed at a random moment, collecting what each run acknowledged. It then starts
a fresh runtime and, calling only the outside ledger and reading the object files
beside the runtime, waits for every acknowledged operation to complete and every
object's last alarm to ring (nothing stranded: no call to the objects gets them
going), and only then calls the objects and checks:

- every acknowledged operation completed, each attempt delivered once;
- each object's alarm rang at its last acknowledged time or at a later schedule;
- log offsets are dense from 0, every acknowledged append is at its offset under its
  key, and no key is stored twice;
- the cursor of consumer "c" never went back;
- no leased range was handed out twice, and a fresh lease starts past all of them.

Run as a script for the long run: `PYTHONPATH=tests python -m crash.mixed_soak --kills 200`
(`scripts/crash-soak` does that).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import sqlite3
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durability.runtime import Runtime

from ._kill import run_and_kill
from .mixed_child import OBJECTS, bindings

CHILD = Path(__file__).with_name("mixed_child.py")
RECOVERY_TIMEOUT_S = 30.0


@dataclass
class Acknowledged:
    """What the killed runs reported, per object number."""

    ops: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))
    ticks: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    appends: dict[int, dict[int, str]] = field(default_factory=lambda: defaultdict(dict))
    cursors: dict[int, int] = field(default_factory=dict)
    acks: dict[int, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))

    def add(self, line: str) -> None:
        words = line.split(" ")
        target = int(words[1])
        if words[0] == "op":
            self.ops[target].append(words[2])
        elif words[0] == "tick":
            self.ticks[target].append(int(words[2]))
        elif words[0] == "append":
            offset = int(words[3])
            known = self.appends[target].setdefault(offset, words[2])
            assert known == words[2], f"offset {offset} acknowledged for {known} and {words[2]}"
        elif words[0] == "cursor":
            self.cursors[target] = max(self.cursors.get(target, 0), int(words[2]))
        elif words[0] == "ack":
            self.acks[target].append((int(words[2]), int(words[3])))

    def count(self) -> int:
        return sum(
            len(by_target)
            for table in (self.ops, self.ticks, self.appends, self.acks)
            for by_target in table.values()
        ) + len(self.cursors)


def soak(workdir: Path, kills: int, seed: int) -> dict[str, int]:
    """Run the soak; raise `AssertionError` naming the seed on any lost or wrong item."""
    rng = random.Random(seed)
    data = workdir / "data"
    acked = Acknowledged()
    for run in range(kills):
        for line in run_and_kill(
            CHILD, [str(data), str(seed * 10_000 + run)], workdir / "out", rng
        ):
            if line != "ready":
                acked.add(line)
    last_tick = max((at for ticks in acked.ticks.values() for at in ticks), default=0)
    time.sleep(max(0.0, last_tick / 1000 - time.time() + 0.05))
    asyncio.run(_recover_and_check(data, acked, seed))
    return {"kills": kills, "acknowledged": acked.count()}


async def _recover_and_check(data: Path, acked: Acknowledged, seed: int) -> None:
    context = f"(seed {seed})"
    async with Runtime(path=data, bindings=bindings) as runtime:
        ledger = runtime.env.LEDGER.get_by_name("ledger")
        files = [
            data / "MIXED" / f"{runtime.env.MIXED.id_from_name(f'm{target}')}.sqlite3"
            for target in range(OBJECTS)
        ]
        deadline = time.monotonic() + RECOVERY_TIMEOUT_S
        while True:
            report = await ledger.report()
            missing = _undelivered(acked, report) + _not_completed(acked, files)
            if not missing or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        assert not missing, f"stranded: {missing[:5]} {context}"
        attempts = [(call_id, attempt) for call_id, attempt in report["deliveries"]]
        assert len(attempts) == len(set(attempts)), f"an attempt was delivered twice {context}"
        for target in range(OBJECTS):
            stub = runtime.env.MIXED.get_by_name(f"m{target}")
            state = await stub.state(acked.ops[target])
            _check_object(target, state, acked, f"object m{target} {context}")
            fresh = await stub.lease_and_ack()
            ranges = acked.acks[target]
            if fresh is not None and ranges:
                assert fresh[0] > max(last for _, last in ranges), f"range again in {context}"


def _not_completed(acked: Acknowledged, files: list[Path]) -> list[str]:
    """Acknowledged operations whose stored status is not yet "completed".

    Read from the object files directly, beside the runtime, so that checking calls no
    object (a call would build an instance, which could get stranded work going).
    """
    missing: list[str] = []
    for target, file in enumerate(files):
        if not acked.ops[target]:
            continue
        reader = sqlite3.connect(f"file:{file}?mode=ro", uri=True)
        try:
            done = {
                call_id
                for (call_id,) in reader.execute(
                    "SELECT id FROM durability_calls WHERE status = 'completed'"
                )
            }
        finally:
            reader.close()
        missing += [call_id for call_id in acked.ops[target] if call_id not in done]
    return missing


def _undelivered(acked: Acknowledged, report: dict[str, list[list[Any]]]) -> list[str]:
    """Acknowledged operations not delivered, and objects whose last alarm never rang."""
    delivered = {call_id for call_id, _ in report["deliveries"]}
    missing = [i for ids in acked.ops.values() for i in ids if i not in delivered]
    rings: dict[str, set[int]] = defaultdict(set)
    for name, at in report["rings"]:
        rings[name].add(at)
    for target, ticks in acked.ticks.items():
        rang = rings[f"m{target}"]
        # The last acknowledged schedule rang, or one made later by a call cut short.
        if ticks[-1] not in rang and rang <= set(ticks):
            missing.append(f"tick of m{target} at {ticks[-1]}")
    return missing


def _check_object(target: int, state: dict[str, Any], acked: Acknowledged, context: str) -> None:
    pending = [i for i, status in state["statuses"].items() if status != "completed"]
    assert not pending, f"operations not completed: {pending[:5]} in {context}"
    records = state["records"]
    assert [offset for offset, _ in records] == list(range(state["next_offset"])), context
    keys = [key for _, key in records]
    assert len(keys) == len(set(keys)), f"a key stored twice in {context}"
    for offset, key in acked.appends[target].items():
        assert offset < len(records), f"acknowledged offset {offset} lost in {context}"
        assert records[offset][1] == key, f"offset {offset} holds another key in {context}"
    committed = acked.cursors.get(target)
    if committed is not None:
        assert (state["cursor"] or 0) >= committed, f"cursor went back in {context}"
    ranges = sorted(acked.acks[target])
    for (_, last), (first, _) in itertools.pairwise(ranges):
        assert last < first, f"a leased range was handed out twice in {context}"


def main() -> None:
    parser = argparse.ArgumentParser(description="Kill a mixed workload again and again.")
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1_000_000)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as workdir:
        figures = soak(Path(workdir), args.kills, seed)
    print(
        f"seed {seed}: {figures['kills']} kills, {figures['acknowledged']} acknowledged items, "
        f"none lost or stranded ({time.monotonic() - started:.0f} s)"
    )


if __name__ == "__main__":
    main()
