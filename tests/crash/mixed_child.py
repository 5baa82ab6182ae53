"""Child process of the mixed-workload crash soak: all capabilities at once until killed.

Usage: mixed_child.py PATH SEED RUN EVERY [drain]. Opens a file-backed Runtime on PATH
(real clock), reports each object's committed cursor ("start OBJ CURSOR"), prints
"ready", then runs concurrent callers against a few objects, each of which holds
durable operations, named alarms, a log and a fanout (with a dead-letter queue) on one
scheduler. A caller draws one of `STEPS` at a time: register an operation;
(re)schedule the object's named alarm `tick` a little ahead; append a record under a
deduplication key drawn from a space shared by every run; move the plain cursor of
consumer "c" forward; lease a range of consumer "l" and ack it; enqueue a fanout
message. A step's line goes to the ledger (stdout, a file the parent reads), flushed
and fsynced, only after its call returned: "op OBJ ID", "tick OBJ AT", "append OBJ KEY
OFFSET", "cursor OBJ OFFSET", "ack OBJ FIRST LAST", "fan OBJ ID". A new capability joins
the soak as one more step here and one more check in `mixed_soak.py`.

Every EVERY runs (see `poison_set`), a run also brings in poison set K on object
K % OBJECTS: an operation, a named alarm and a fanout message (to the target "poison")
all named `poison_id(K)`, each of which kills its process whenever it runs. It does so
while the callers run, before "ready" (so the parent's kill never comes first): the
line "poison OBJ K" is written before they are made, "poisoned OBJ K" once they are
all stored. A dead-letter write that is dropped writes "dropped ID". A run in which a
poison runs dies of its own SIGKILL, often before "ready".

With `drain`, the run makes no calls of its own: once no poison can run any more, it
prints "drained" and exits (a poison that runs meanwhile kills it, as in any run).

Handlers, alarms, fanout targets and the dead-letter queue report their effects to
the `LEDGER` object (`mixed_object.py`), tagged with RUN (the `RUN` binding).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

# Run as a script only: its own directory, with mixed_object.py, is on the path.
from mixed_object import (
    CALLERS,
    DRAIN_TIMEOUT_S,
    DROPPED,
    KEYS,
    OBJECTS,
    TICK_AHEAD_MS,
    bindings,
    poison_set,
)

from durability.runtime import Runtime


@dataclass(frozen=True)
class Draw:
    """What one step works with: the target object, its number, a caller-unique id."""

    stub: Any
    target: int
    unique: str
    rng: random.Random
    now_ms: int


Step = Callable[[Draw], Awaitable[str | None]]
"""One kind of call: makes it and returns its ledger line (None: nothing acknowledged)."""


async def register_operation(draw: Draw) -> str:
    await draw.stub.register(draw.unique)
    return f"op {draw.target} {draw.unique}"


async def reschedule_alarm(draw: Draw) -> str:
    at = draw.now_ms + draw.rng.randrange(*TICK_AHEAD_MS)
    await draw.stub.tick_at(at)
    return f"tick {draw.target} {at}"


async def append_keyed(draw: Draw) -> str:
    key = f"k{draw.rng.randrange(KEYS)}"
    return f"append {draw.target} {key} {await draw.stub.append(key)}"


async def advance_cursor(draw: Draw) -> str | None:
    cursor = await draw.stub.advance_cursor()
    return None if cursor is None else f"cursor {draw.target} {cursor}"


async def lease_and_ack(draw: Draw) -> str | None:
    acked = await draw.stub.lease_and_ack()
    return None if acked is None else f"ack {draw.target} {acked[0]} {acked[1]}"


async def fan_out(draw: Draw) -> str:
    await draw.stub.enqueue(draw.unique)
    return f"fan {draw.target} {draw.unique}"


STEPS: list[tuple[Step, int]] = [
    (register_operation, 35),
    (reschedule_alarm, 10),
    (append_keyed, 35),
    (advance_cursor, 10),
    (lease_and_ack, 10),
    (fan_out, 10),
]
"""Each step and its weight in the draw."""


def record(line: str) -> None:
    """Append `line` to the ledger and make it durable before the caller goes on."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    os.fsync(sys.stdout.fileno())


class DropNotes(logging.Handler):
    """Writes "dropped ID" to the ledger for each dead letter the fanout drops."""

    def emit(self, entry: logging.LogRecord) -> None:
        if getattr(entry, "event", None) == DROPPED:
            record(f"dropped {getattr(entry, 'details', {}).get('id')}")


async def drain(objects: list[Any]) -> None:
    """Wait for every poison to settle (or for `DRAIN_TIMEOUT_S`); "drained" if they did."""
    deadline = asyncio.get_running_loop().time() + DRAIN_TIMEOUT_S
    while asyncio.get_running_loop().time() < deadline:
        if not [item for stub in objects for item in await stub.live_poisons()]:
            record("drained")
            return
        await asyncio.sleep(0.05)


async def main(path: str, seed: int, run: int, every: int, mode: str) -> None:
    rng = random.Random(seed)
    steps, weights = zip(*STEPS, strict=True)
    logger = logging.getLogger("durability")
    logger.addHandler(DropNotes())
    logger.addHandler(logging.StreamHandler())
    async with Runtime(path=path, bindings=bindings(run, every, kill=True)) as runtime:
        objects = [runtime.env.MIXED.get_by_name(f"m{n}") for n in range(OBJECTS)]
        for target, stub in enumerate(objects):
            record(f"start {target} {await stub.cursor()}")
        if mode == "drain":
            record("ready")
            await drain(objects)
            return

        async def caller(number: int) -> None:
            for sequence in range(1_000_000):
                target = rng.randrange(OBJECTS)
                unique = f"{seed}-{number}-{sequence}"
                draw = Draw(objects[target], target, unique, rng, runtime.now_ms())
                line = await rng.choices(steps, weights)[0](draw)
                if line is not None:
                    record(line)

        callers = asyncio.gather(*(caller(n) for n in range(CALLERS)))
        number = poison_set(run, every)
        if number is not None:
            # Before "ready", so that the parent's kill never comes first: the set is
            # stored whole, and its message kills the process as soon as it is.
            target = number % OBJECTS
            record(f"poison {target} {number}")
            await objects[target].bring_in_poisons(number)
            record(f"poisoned {target} {number}")
        record("ready")
        await callers


if __name__ == "__main__":
    arguments = sys.argv[1:]
    mode = arguments[4] if len(arguments) > 4 else "run"
    asyncio.run(main(arguments[0], int(arguments[1]), int(arguments[2]), int(arguments[3]), mode))
