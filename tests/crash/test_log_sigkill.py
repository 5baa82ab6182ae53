"""The retained log survives SIGKILL: acknowledged appends, commits and leases are kept."""

from __future__ import annotations

import itertools
import json
import random
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from durability.runtime import Runtime

from ._kill import run_and_kill
from .log_child import PARTITIONS, bindings

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("log_child.py")
RUNS = 4


class Acknowledged:
    """What the killed children reported as acknowledged, per partition."""

    def __init__(self) -> None:
        self.appends: dict[int, list[tuple[list[list[Any]], list[int]]]] = defaultdict(list)
        self.commits: dict[int, int] = {}
        self.last_write: dict[str, int] = {}
        self.leases: dict[int, dict[str, tuple[int, int]]] = defaultdict(dict)
        self.acks: dict[int, set[str]] = defaultdict(set)

    def add(self, line: str) -> None:
        """Record one line a child printed (anything but "ready")."""
        words = line.split(" ")
        target = int(words[1])
        if words[0] == "commit":
            self.commits[target] = max(self.commits.get(target, 0), int(words[2]))
        elif words[0] == "append":
            items, offsets = json.loads(words[2]), json.loads(words[3])
            self.appends[target].append((items, offsets))
            producer, _, sequence = items[0][0]["w"].rpartition("-")
            self.last_write[producer] = max(self.last_write.get(producer, -1), int(sequence))
        elif words[0] == "lease":
            self.leases[target][words[2]] = (int(words[3]), int(words[4]))
        elif words[0] == "ack":
            self.acks[target].add(words[2])

    def possible(self, write: str) -> bool:
        """Whether a producer could have sent `write`: at most one past its last ack."""
        producer, _, sequence = write.rpartition("-")
        return int(sequence) <= self.last_write.get(producer, -1) + 1


def _check_partition(target: int, dump: dict[str, Any], acked: Acknowledged, seed: int) -> None:
    """Records: dense, acknowledged offsets hold their inputs, one offset per key, no torn
    or invented batch; the committed cursor never went back."""
    context = f"partition {target} (seed {seed})"
    records = dump["records"]
    offsets = [offset for offset, _, _ in records]
    assert dump["oldest"] == 0, context
    assert offsets == list(range(dump["next"])), f"offsets not dense from 0 in {context}"

    key_offsets: dict[str, set[int]] = defaultdict(set)
    for items, acked_offsets in acked.appends[target]:
        assert len(acked_offsets) == len(items), context
        for (body, key), offset in zip(items, acked_offsets, strict=True):
            assert offset < dump["next"], f"acknowledged offset {offset} lost in {context}"
            _, stored_key, stored_body = records[offset]
            if key is None:
                assert stored_body == body, f"offset {offset} holds another body in {context}"
            else:
                key_offsets[key].add(offset)
                assert stored_key == key == stored_body["key"], f"offset {offset} in {context}"
    split = {key: sorted(found) for key, found in key_offsets.items() if len(found) > 1}
    assert not split, f"keys acknowledged at several offsets: {split} in {context}"
    per_key = Counter(body["key"] for _, _, body in records if body["key"] is not None)
    twice = [key for key, count in per_key.items() if count > 1]
    assert not twice, f"keys stored at several offsets: {twice[:5]} in {context}"

    stored: dict[str, set[int]] = defaultdict(set)
    unkeyed: dict[str, set[int]] = {}
    for _, _, body in records:
        stored[body["w"]].add(body["i"])
        unkeyed[body["w"]] = set(body["plain"])
    phantoms = [write for write in stored if not acked.possible(write)]
    assert not phantoms, f"records of appends never made: {phantoms[:5]} in {context}"
    # An unkeyed input always adds a record, so a batch seen at all is seen whole.
    torn = [write for write, indices in stored.items() if not unkeyed[write] <= indices]
    assert not torn, f"batches committed in part: {torn[:5]} in {context}"

    cursor = dump["cursor"]
    committed = acked.commits.get(target)
    if committed is not None:
        assert cursor is not None and cursor >= committed, f"cursor rewound in {context}"
    assert cursor is None or cursor <= dump["next"], context


def _check_leases(
    target: int, dump: dict[str, Any], fresh: list[Any] | None, acked: Acknowledged, seed: int
) -> None:
    """Leases: no range handed out twice (`fresh` included), held ones still held, the
    leased cursor past every acked range of an unbroken run from 0."""
    context = f"partition {target} (seed {seed})"
    leased = sorted((first, last, batch) for batch, (first, last) in acked.leases[target].items())
    for (_, last, batch), (first, _, other) in itertools.pairwise(leased):
        assert last < first, f"ranges of {batch} and {other} overlap in {context}"
    cursor = dump["leased_cursor"] or 0
    rows = {batch: (first, last, state) for batch, first, last, state in dump["leases"]}
    for first, last, batch in leased:
        if batch in acked.acks[target]:
            continue
        row = rows.get(batch)
        if row is None:
            # Only an ack that committed unreported lets a range go, once passed by the cursor.
            assert last < cursor, f"held range {batch} released early in {context}"
        else:
            assert row[:2] == (first, last) and row[2] in ("active", "acked"), context
    settled = 0
    for first, last, batch in leased:
        if first != settled or batch not in acked.acks[target]:
            break
        settled = last + 1
    assert cursor >= settled, f"leased cursor {cursor} behind acked {settled} in {context}"
    if fresh is not None and leased:
        assert fresh[1] > leased[-1][1], f"range handed out again {fresh} in {context}"


async def test_acknowledged_appends_and_commits_survive_sigkill(tmp_path: Path) -> None:
    """Killed runs: offsets read back dense, one per key; cursors and held leases are kept."""
    seed = random.randrange(1_000_000)
    rng = random.Random(seed)
    data = tmp_path / "data"
    acked = Acknowledged()
    for run in range(RUNS):
        out = tmp_path / f"run{run}.out"
        for line in run_and_kill(CHILD, [str(data), str(seed * 100 + run)], out, rng):
            if line != "ready":
                acked.add(line)
    appended = sum(len(appends) for appends in acked.appends.values())
    enough = appended > RUNS and acked.commits and acked.acks
    assert enough, f"too little acknowledged (seed {seed})"
    async with Runtime(path=str(data), bindings=bindings) as runtime:
        for target in range(PARTITIONS):
            partition = runtime.env.PARTITIONS.get_by_name(f"partition-{target}")
            dump = await partition.dump()
            _check_partition(target, dump, acked, seed)
            _check_leases(target, dump, await partition.lease(100), acked, seed)
