"""The mixed-workload crash soak: kill the child again and again, then check everything.

`soak(workdir, kills, seed, every)` runs `mixed_child.py` on one data path `kills`
times, each SIGKILLed at a random moment after "ready" unless a poison kills it first
(every `every` runs bring in a poison set: an operation, a named alarm and a fanout
message that kill their process whenever they run), collecting what each run
acknowledged. Drain runs follow, without calls of their own, until no poison can run
any more (each poison that runs kills one of them). It then starts a fresh runtime
and, calling only the outside ledger and reading the object files beside the runtime,
waits for every acknowledged operation to complete, every object's last alarm to ring
and every pending row to go (nothing stranded: no call to the objects gets them
going), and only then calls the objects and checks:

- every acknowledged operation completed, and no other one is left unfinished or
  failed; an effect (operation delivery, alarm ring or fanout delivery) repeats only
  in a later run than before, that is when a kill fell between the effect and its
  record;
- each object's alarm rang at its last acknowledged time or at a later schedule;
- log offsets are dense from 0, every acknowledged append is at its offset under its
  key, and no key is stored twice;
- the cursor of consumer "c" never went back (each run reports it at start, and the
  final one is checked);
- no leased range was handed out twice, and a fresh lease starts past all of them;
- every acknowledged fanout message reached its target (an effect like the others),
  no delivery is left in any object's backlog, and only poisons were dead-lettered;
- every poison ends failed or dead-lettered by its interruptions (`mixed_poison.py`).

Run as a script for the long run: `PYTHONPATH=tests python -m crash.mixed_soak --kills 200`
(`scripts/crash-soak` does that).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import random
import sqlite3
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durability.runtime import Runtime

from ._kill import run_child, run_until_killed
from .mixed_object import DRAIN_TIMEOUT_S, DROPPED, OBJECTS, bindings, poison_id
from .mixed_poison import check_poisons

CHILD = Path(__file__).with_name("mixed_child.py")
RECOVERY_TIMEOUT_S = 30.0
POISON_EVERY = 25
"""One run in this many brings in a poison set, which takes a few more runs to fail."""
MAX_DRAIN_RUNS = 40


@dataclass
class Acknowledged:
    """What the killed runs reported, per object number, and the poisons."""

    ops: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))
    ticks: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    appends: dict[int, dict[int, str]] = field(default_factory=lambda: defaultdict(dict))
    cursors: dict[int, int] = field(default_factory=dict)
    acks: dict[int, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))
    fans: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))
    poisons: dict[int, int] = field(default_factory=dict)
    """Each poison set a run began to store, and its object."""
    stored: set[int] = field(default_factory=set)
    """The poison sets stored whole."""
    dropped: set[str] = field(default_factory=set)

    def add(self, line: str) -> None:
        words = line.split(" ")
        if words[0] in ("ready", "drained"):
            return
        if words[0] == "dropped":
            self.dropped.add(words[1])
            return
        target = int(words[1])
        if words[0] == "start":
            found = None if words[2] == "None" else int(words[2])
            committed = self.cursors.get(target)
            moved_back = committed is not None and (found is None or found < committed)
            assert not moved_back, f"cursor of m{target} back to {found} from {committed}"
        elif words[0] == "op":
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
        elif words[0] == "fan":
            self.fans[target].append(words[2])
        elif words[0] == "poison":
            self.poisons[int(words[2])] = target
        elif words[0] == "poisoned":
            self.stored.add(int(words[2]))

    def count(self) -> int:
        return sum(
            len(by_target)
            for table in (self.ops, self.ticks, self.appends, self.acks, self.fans)
            for by_target in table.values()
        ) + len(self.cursors)

    def poisons_of(self, target: int) -> list[str]:
        """The ids of the poison sets brought in on object m`target`."""
        return [poison_id(number) for number, on in self.poisons.items() if on == target]


def soak(workdir: Path, kills: int, seed: int, every: int = POISON_EVERY) -> dict[str, int]:
    """Run the soak; raise `AssertionError` naming the seed on any lost or wrong item.

    `kills` runs are killed, by the parent or by a poison; the drain runs that follow
    add the kills of the poisons still to fail. The figures count them all."""
    rng = random.Random(seed)
    data = workdir / "data"
    acked = Acknowledged()
    own_kills = 0
    for run in range(kills):
        args = [str(data), str(seed * 10_000 + run), str(run), str(every)]
        lines, own_kill = run_until_killed(CHILD, args, workdir / "out", rng)
        own_kills += own_kill
        for line in lines:
            acked.add(line)
    run = kills
    while True:
        assert run - kills < MAX_DRAIN_RUNS, f"poisons still live after the drain (seed {seed})"
        args = [str(data), str(seed * 10_000 + run), str(run), str(every), "drain"]
        code, lines = run_child(
            CHILD, *args, timeout_s=DRAIN_TIMEOUT_S + 30, out_file=workdir / "out"
        )
        run += 1
        for line in lines:
            acked.add(line)
        if code == 0:
            assert "drained" in lines, f"poisons never settled in a drain run (seed {seed})"
            break
        own_kills += 1
    last_tick = max((at for ticks in acked.ticks.values() for at in ticks), default=0)
    time.sleep(max(0.0, last_tick / 1000 - time.time() + 0.05))
    started = time.monotonic()
    figures = asyncio.run(_recover_and_check(data, acked, run, every, seed))
    figures["recovery s"] = round(time.monotonic() - started)
    figures["drain runs"] = run - kills
    figures["kills"] = run - 1
    figures["poison kills"] = own_kills
    figures["acknowledged"] = acked.count()
    return figures


async def _recover_and_check(
    data: Path, acked: Acknowledged, run: int, every: int, seed: int
) -> dict[str, int]:
    """Run a fresh runtime (run number `run`) until nothing is missing, then check it all.

    Returns how many effects repeated (each one explained by a kill) and the outcomes
    of the poisons.
    """
    context = f"(seed {seed})"
    with _dropped_here(acked.dropped):
        async with Runtime(path=data, bindings=bindings(run, every, kill=False)) as runtime:
            ledger = runtime.env.LEDGER.get_by_name("ledger")
            files = [
                data / "MIXED" / f"{runtime.env.MIXED.id_from_name(f'm{target}')}.sqlite3"
                for target in range(OBJECTS)
            ]
            # A dead-letter write a kill cut short is retried only a minute later.
            wait_s = max(0.0, _last_retry_ms(files) / 1000 - time.time())
            deadline = time.monotonic() + RECOVERY_TIMEOUT_S + wait_s
            while True:
                report = await ledger.report()
                missing = _undelivered(acked, report) + _not_completed(acked, files)
                missing += _pending_rows(files)
                if not missing or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)
            assert not missing, (
                f"stranded: {missing[:5]} {context}; now {runtime.now_ms()}; "
                + "; ".join(_alarm_state(target, file) for target, file in enumerate(files))
                + f"; catalog {_catalog_rows(data)}"
                + f"; last acknowledged ticks { {n: t[-3:] for n, t in acked.ticks.items()} }"
                + f"; last rings {sorted(report['rings'], key=lambda ring: ring[1])[-6:]}"
            )
            stubs = [runtime.env.MIXED.get_by_name(f"m{target}") for target in range(OBJECTS)]
            states = [
                await stub.state(acked.ops[n], acked.poisons_of(n)) for n, stub in enumerate(stubs)
            ]
            # Every message reached the ledger; each ack follows its delivery by a moment.
            while (backlog := [await stub.backlog() for stub in stubs]) != [0] * OBJECTS:
                assert time.monotonic() < deadline, f"fanout backlog left: {backlog} {context}"
                await asyncio.sleep(0.1)
            report = await ledger.report()
            figures = {"repeats": _check_repeats(report, context)}
            for target, (stub, state) in enumerate(zip(stubs, states, strict=True)):
                _check_object(target, state, acked, f"object m{target} {context}")
                fresh = await stub.lease_and_ack()
                ranges = acked.acks[target]
                if fresh is not None and ranges:
                    assert fresh[0] > max(last for _, last in ranges), f"range again in {context}"
    poisons = check_poisons(
        acked.poisons, acked.stored, acked.dropped, states, report, run, context
    )
    return figures | poisons


@contextmanager
def _dropped_here(dropped: set[str]) -> Iterator[None]:
    """Add to `dropped` the id of each dead letter this process drops meanwhile."""

    class Notes(logging.Handler):
        def emit(self, entry: logging.LogRecord) -> None:
            if getattr(entry, "event", None) == DROPPED:
                dropped.add(str(getattr(entry, "details", {}).get("id")))

    logger = logging.getLogger("durability")
    notes = Notes()
    logger.addHandler(notes)
    try:
        yield
    finally:
        logger.removeHandler(notes)


def _check_repeats(report: dict[str, list[list[Any]]], context: str) -> int:
    """Effects repeat only across runs: within one run no kill fell between an effect
    and its record, so nothing may run twice there. How many effects repeated."""
    runs: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for call_id, attempt, run in report["deliveries"]:
        runs["op", call_id].append((attempt, run))
    for name, at, run in report["rings"]:
        runs[f"tick of {name}", str(at)].append((0, run))
    for message_id, attempt, run in report["fanned"]:
        runs["fan", message_id].append((attempt, run))
    repeats = 0
    for effect, seen in runs.items():
        seen.sort()
        attempts = [attempt for attempt, _ in seen]
        in_order = [run for _, run in seen]
        assert len(set(in_order)) == len(in_order), f"{effect} repeated in one run {context}"
        # Operation and fanout claims are durable before the effect runs: each repeat
        # after a kill comes with a new attempt number.
        if effect[0] in ("op", "fan"):
            assert len(set(attempts)) == len(attempts), f"{effect}: an attempt twice {context}"
            assert in_order == sorted(in_order), f"{effect}: attempts out of order {context}"
        repeats += len(seen) - 1
    return repeats


def _read(file: Path, query: str) -> list[tuple[Any, ...]]:
    """The rows of `query` on `file`, read beside the runtime (a call to the object
    would build an instance, which could get stranded work going)."""
    reader = sqlite3.connect(f"file:{file}?mode=ro", uri=True)
    try:
        return reader.execute(query).fetchall()
    finally:
        reader.close()


def _alarm_state(target: int, file: Path) -> str:
    """Object m`target`'s alarm row and named-alarm rows: what a stranded failure needs
    to be told apart (late retry, lost row, wrong wake time)."""
    alarm = _read(file, "SELECT * FROM _durability_alarm")
    named = _read(file, "SELECT * FROM durability_alarms")
    return f"m{target}: alarm {alarm}, named alarms {named}"


def _catalog_rows(data: Path) -> list[tuple[Any, ...]]:
    """The runtime's alarm catalog, read beside it."""
    return _read(data / "_catalog.sqlite3", "SELECT * FROM alarms")


def _not_completed(acked: Acknowledged, files: list[Path]) -> list[str]:
    """Acknowledged operations whose stored status is not yet "completed"."""
    missing: list[str] = []
    for target, file in enumerate(files):
        if not acked.ops[target]:
            continue
        query = "SELECT id FROM durability_calls WHERE status = 'completed'"
        done = {call_id for (call_id,) in _read(file, query)}
        missing += [call_id for call_id in acked.ops[target] if call_id not in done]
    return missing


def _pending_rows(files: list[Path]) -> list[str]:
    """Work any object still has to do: pending operations and named alarms, and fanout
    deliveries (acknowledged or not: nothing may be left behind)."""
    queries = (
        "SELECT 'operation ' || id FROM durability_calls WHERE status = 'pending'",
        "SELECT 'named alarm ' || name FROM durability_alarms WHERE status = 'pending'",
        "SELECT 'delivery ' || id || ' (' || phase || ')' FROM durability_fanout_deliveries",
    )
    return [
        f"{row[0]} of m{target}"
        for target, file in enumerate(files)
        for query in queries
        for row in _read(file, query)
    ]


def _last_retry_ms(files: list[Path]) -> int:
    """The latest time a fanout delivery row of any object is due again (0: none)."""
    query = "SELECT max(next_attempt_at) FROM durability_fanout_deliveries"
    return max((int(row[0] or 0) for file in files for row in _read(file, query)), default=0)


def _undelivered(acked: Acknowledged, report: dict[str, list[list[Any]]]) -> list[str]:
    """Acknowledged operations and fanout messages not delivered, and objects whose last
    alarm never rang."""
    delivered = {call_id for call_id, _, _ in report["deliveries"]}
    missing = [i for ids in acked.ops.values() for i in ids if i not in delivered]
    fanned = {message_id for message_id, _, _ in report["fanned"]}
    missing += [i for ids in acked.fans.values() for i in ids if i not in fanned]
    rings: dict[str, set[int]] = defaultdict(set)
    for name, at, _ in report["rings"]:
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
    assert not state["unfinished"], f"operations left: {state['unfinished'][:5]} in {context}"
    assert not state["alarms_pending"], f"alarms left: {state['alarms_pending']} in {context}"
    assert state["tick"] is None, f"alarm tick ends {state['tick']} in {context}"
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
    parser.add_argument("--every", type=int, default=POISON_EVERY, help="runs per poison set")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1_000_000)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as workdir:
        figures = soak(Path(workdir), args.kills, seed, args.every)
    print(
        f"seed {seed}: {figures['kills']} kills ({figures['poison kills']} by poisons), "
        f"{figures['acknowledged']} acknowledged items, none lost or stranded; "
        f"{figures['repeats']} effects repeated, each after a kill; poisons: "
        f"{figures['poison operations']} operations and {figures['poison alarms']} alarms "
        f"failed, {figures['dead-lettered']} messages dead-lettered, {figures['dropped']} "
        f"dropped; {figures['drain runs']} drain runs, recovered in {figures['recovery s']} s "
        f"({time.monotonic() - started:.0f} s)"
    )


if __name__ == "__main__":
    main()
