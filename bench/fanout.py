"""Fanout: messages enqueued and fully delivered to two consumer targets, vs raw sqlite3.

    python bench/fanout.py [--messages 20000] [--callers 200] [--rounds 3] [--dir DIR]

Everything runs in one process on real files (WAL, every commit synced) and the real clock.
Concurrent callers enqueue messages on ONE file-backed object (each call
returns once the message is durable); the clock stops when both consumer targets have
settled every message, so every manifest and delivery row is gone again. Three
configurations: the defaults (batches of 10, an explicit `ack()` per message),
`ack_on_return` with batches of 100 (one transaction settles a whole batch), and the
same with callers that enqueue 10 messages per call.

Beside them, raw sqlite3 does the same row work per message in the same tables and
indexes (insert the manifest and two delivery rows, bump the sequence, claim each
delivery, delete it, release the manifest) with one fsynced commit per message, and
batched 100 messages per commit. The floor rows are raw sqlite3 doing the fanout's own
commit pattern with its guarantees (the enqueues of all callers registered in one commit,
each target's batch of 100 claimed in one commit before it would be handed over and
removed in one commit after), once with a statement step per row (`executemany`) and
once with multi-row statements of at most 100 bindings (all the Durable Object SQL API
offers): how far the library is from the best any implementation of these guarantees
could do on this disk. `LeanFanout` (fanout_lean.py) does those commits through the
embedded runtime, each enqueue a call into the object, and nothing else: what any
library running on this runtime pays at least.
Each row is measured `--rounds` times (a fresh database each time) and reported as the
median with its range; fanout rows also give the median process CPU time per message,
which (with the raw one-commit rate) bounds the ratio a faster disk or an idle machine
could show.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import sqlite3
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fanout_lean import bench_lean, drive
from fanout_raw import TARGETS, bench_floor, bench_floor_set, bench_raw

from durability import DurabilityFanout, FanoutInput, FanoutMessage, FanoutTarget
from durability.runtime import AlarmInvocationInfo, DurableObject, Runtime


@dataclass
class Settings:
    """Options the benchmark object reads when it is built."""

    max_batch_size: int = 10
    ack_on_return: bool = False


settings = Settings()


class FanoutBench(DurableObject):
    """A fanout to two consumer targets that count what they settled."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.settled = dict.fromkeys(TARGETS, 0)
        self.target = 0
        self.done = asyncio.Event()
        self.fanout: DurabilityFanout[int] = DurabilityFanout(
            context=ctx,
            targets={
                name: FanoutTarget(
                    deliver=self._consumer(name), ack_on_return=settings.ack_on_return
                )
                for name in TARGETS
            },
            max_batch_size=settings.max_batch_size,
        )

    def _consumer(self, name: str) -> Any:
        async def deliver(messages: Sequence[FanoutMessage[int]]) -> None:
            if not settings.ack_on_return:
                for message in messages:
                    await message.ack()
            self.settled[name] += len(messages)
            if min(self.settled.values()) >= self.target:
                self.done.set()

        return deliver

    async def enqueue(self, ids: list[str]) -> None:
        """Enqueue messages with these ids in one call; returns once they are durable."""
        result = await self.fanout.enqueue([FanoutInput(0, id=id) for id in ids])
        assert result.success, result.error

    async def expect(self, count: int) -> None:
        """Arm the completion counter for `count` messages per target."""
        self.settled = dict.fromkeys(TARGETS, 0)
        self.target = count
        self.done.clear()

    async def wait_delivered(self) -> int:
        """Wait until both targets settled everything; return the rows still stored."""
        await self.done.wait()
        # The last batch's settlement may still be committing: let it finish.
        while (await self.fanout.load()).outbound.pending_deliveries:
            await asyncio.sleep(0.001)
        rows = self.ctx.storage.sql.exec(
            "SELECT (SELECT COUNT(*) FROM durability_fanout_deliveries) + "
            "(SELECT COUNT(*) FROM durability_fanout_messages) AS n"
        )
        return int(rows.one()["n"])

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        await self.fanout.alarm(info)


async def bench_fanout(
    directory: Path,
    messages: int,
    callers: int,
    configuration: tuple[str, int, bool, int],
) -> tuple[float, float]:
    """Seconds from the first enqueue until both targets settled all `messages`, and the
    process CPU seconds spent meanwhile."""
    _, max_batch_size, ack_on_return, per_call = configuration
    settings.max_batch_size = max_batch_size
    settings.ack_on_return = ack_on_return
    async with Runtime(path=directory, bindings={"FANOUT": FanoutBench}) as rt:
        return await drive(rt.env.FANOUT.get_by_name("fanout"), messages, callers, per_call)


def _rates(count: int, seconds: list[float]) -> tuple[float, str]:
    """The median rate of `count` messages over runs of `seconds`, and its range as text."""
    rates = sorted(count / value for value in seconds)
    median = statistics.median(rates)
    if len(rates) == 1:
        return median, f"{median:,.0f} msg/s"
    return median, f"{median:,.0f} msg/s ({rates[0]:,.0f} to {rates[-1]:,.0f})"


CONFIGURATIONS = (
    ("1 message per enqueue; defaults: batches of 10, ack() per message", 10, False, 1),
    ("1 message per enqueue; ack_on_return, batches of 100", 100, True, 1),
    ("10 messages per enqueue; ack_on_return, batches of 100", 100, True, 10),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000, help="messages to enqueue")
    parser.add_argument("--callers", type=int, default=200, help="concurrent callers")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each row")
    parser.add_argument(
        "--raw-messages", type=int, default=2_000, help="raw sqlite3 messages, 1 commit each"
    )
    parser.add_argument(
        "--dir", type=Path, default=Path.cwd(), help="where the databases go (a real disk)"
    )
    args = parser.parse_args()
    raw_one: list[float] = []
    raw_batched: list[float] = []
    floor: list[tuple[float, float]] = []
    floor_set: list[tuple[float, float]] = []
    lean: list[tuple[float, float]] = []
    runtime: dict[str, list[float]] = {configuration[0]: [] for configuration in CONFIGURATIONS}
    cpu: dict[str, list[float]] = {configuration[0]: [] for configuration in CONFIGURATIONS}
    with tempfile.TemporaryDirectory(prefix="durability-bench-", dir=args.dir) as tmp:
        for round_number in range(args.rounds):
            here = Path(tmp) / f"round-{round_number}"
            here.mkdir()
            raw_one.append(bench_raw(here, args.raw_messages, 1))
            raw_batched.append(bench_raw(here, args.messages, 100))
            floor.append(bench_floor(here, args.messages, args.callers, 100))
            floor_set.append(bench_floor_set(here, args.messages, args.callers))
            lean.append(asyncio.run(bench_lean(here / "lean", args.messages, args.callers)))
            for index, configuration in enumerate(CONFIGURATIONS):
                elapsed, spent = asyncio.run(
                    bench_fanout(
                        here / f"runtime-{index}", args.messages, args.callers, configuration
                    )
                )
                runtime[configuration[0]].append(elapsed)
                cpu[configuration[0]].append(spent)
            print(f"round {round_number + 1} of {args.rounds} done", file=sys.stderr)

    raw_rate, raw_text = _rates(args.raw_messages, raw_one)
    batched_rate, batched_text = _rates(args.messages, raw_batched)
    rows = [
        (
            "raw sqlite3: the same row work, 1 commit per message",
            f"{args.raw_messages:,}",
            raw_text,
        ),
        (
            "raw sqlite3: the same, 100 messages per commit",
            f"{args.messages:,}",
            f"{batched_text}, {batched_rate / raw_rate:.1f}x",
        ),
    ]
    floors = (
        (
            f"raw sqlite3 floor: the fanout's commits ({args.callers} enqueues per commit; "
            "per target and batch of 100, the claims' commit then the removals' commit), "
            "a statement step per row (executemany)",
            floor,
        ),
        (
            "the same commits in multi-row statements of at most 100 bindings, as the "
            "Durable Object SQL API allows",
            floor_set,
        ),
        (
            "least work through this runtime (LeanFanout): those commits, each enqueue a "
            "call into the object",
            lean,
        ),
    )
    floor_rates: list[float] = []
    for label, measured in floors:
        rate, text = _rates(args.messages, [seconds for seconds, _ in measured])
        spent = statistics.median(cpu_seconds for _, cpu_seconds in measured)
        floor_rates.append(rate)
        rows.append(
            (
                label,
                f"{args.messages:,}",
                f"{text}, {rate / raw_rate:.1f}x; CPU {spent / args.messages * 1e6:.0f} us/msg",
            )
        )
    best_raw = max(floor_rates[:2])
    for label, seconds in runtime.items():
        rate, text = _rates(args.messages, seconds)
        per_message = statistics.median(cpu[label]) / args.messages * 1e6
        rows.append(
            (
                f"durability: enqueue -> settled by 2 targets, 1 object, {args.callers} "
                f"callers, {label}",
                f"{args.messages:,}",
                f"{text}, {rate / raw_rate:.1f}x; CPU {per_message:.0f} us/msg; "
                f"{rate / best_raw:.2f}x the faster raw floor, "
                f"{rate / floor_rates[2]:.2f}x LeanFanout",
            )
        )
    versions = f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}"
    print(
        f"{versions}, WAL, every commit synced, {platform.machine()}, real clock, "
        f"median of {args.rounds} (range)"
    )
    print()
    budget = 1e6 / (10 * raw_rate)
    print(f"10x the raw one-commit rate leaves {budget:.0f} us of CPU per message")
    print()
    print("| benchmark | messages | result (x = vs raw, 1 commit per message) |")
    print("|---|---:|---:|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
