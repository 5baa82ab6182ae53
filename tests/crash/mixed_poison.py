"""The checks of the mixed soak's poison items, once every run is over.

Each poison set brought in (an operation, a named alarm and a fanout message, all named
`poison_id(K)`, that kill their process whenever they run) must end as poison
isolation says, and nothing else may be charged for it:

- the operation and the named alarm are failed, exhausted by interruptions ("... (N
  interrupted: ...)", N at least the runs the ledger saw and at least the attempt
  limit), with an attempt number at least as high as any run of them had;
- the message is dead-lettered with reason `interrupted` and such an error, or its
  dead-letter write was dropped (the only way it can leave the queue otherwise: its
  target never acks); either way nothing of it is left pending;
- each poison ran at most once per run, with a new, growing attempt number each time,
  and never in the checking process;
- every dead letter is a poison's: no other message was ever dead-lettered.

A set whose "poisoned" line was written was stored whole, so each of its items must
exist; a set the run was killed while storing may lack some (never run, then).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from .mixed_object import POISON_ATTEMPTS, poison_id

INTERRUPTED = re.compile(rf"exhausted its {POISON_ATTEMPTS} attempts \((\d+) interrupted")


def check_poisons(
    sets: dict[int, int],
    stored: set[int],
    dropped: set[str],
    states: list[dict[str, Any]],
    report: dict[str, list[list[Any]]],
    checking_run: int,
    context: str,
) -> dict[str, int]:
    """Check poison sets `sets` (number: object), of which `stored` were acknowledged
    whole, against the objects' `states`, the ledger's `report` and the ids whose dead
    letter was `dropped` (`checking_run`: the run number of the checking process).
    Returns how many of each outcome."""
    runs = _poison_runs(report, checking_run, context)
    dead = _dead_letters(report, {poison_id(number) for number in sets}, context)
    figures = {"poison operations": 0, "poison alarms": 0, "dead-lettered": 0, "dropped": 0}
    for number, target in sets.items():
        item = poison_id(number)
        state = states[target]
        for kind, outcome, figure in (
            ("op", state["poison_ops"][item], "poison operations"),
            ("alarm", state["poison_alarms"][item], "poison alarms"),
        ):
            seen = runs[kind, item]
            if outcome is None:
                assert number not in stored, f"poison {kind} {item} lost {context}"
                assert not seen, f"poison {kind} {item} ran but is not stored {context}"
                continue
            status, attempt, error = outcome
            assert status == "failed", f"poison {kind} {item} ends {status} {context}"
            _check_interrupted(f"poison {kind} {item}", error, seen, context)
            assert attempt >= max((a for a, _ in seen), default=0), f"{item}: attempt {context}"
            figures[figure] += 1
        seen = runs["fan", item]
        if item in dead:
            _check_interrupted(f"poison message {item}", dead[item], seen, context)
            figures["dead-lettered"] += 1
        elif item in dropped:
            figures["dropped"] += 1
        else:
            assert number not in stored, f"poison message {item} lost {context}"
            assert not seen, f"poison message {item} ran, then vanished {context}"
    unknown = {item for item in dropped if item not in {poison_id(n) for n in sets}}
    assert not unknown, f"dead letters of {sorted(unknown)} dropped {context}"
    return figures


def _poison_runs(
    report: dict[str, list[list[Any]]], checking_run: int, context: str
) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """Each poison's `(attempt, run)` runs, checked: none in the checking process, at
    most one per run, every run with a new attempt number, growing from run to run."""
    runs: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for kind, item, attempt, run in report["poisoned"]:
        assert run < checking_run, f"poison {kind} {item} ran in the checking process {context}"
        runs[kind, item].append((attempt, run))
    for (kind, item), seen in runs.items():
        seen.sort()
        attempts = [attempt for attempt, _ in seen]
        in_order = [run for _, run in seen]
        assert len(set(in_order)) == len(in_order), f"{kind} {item} ran twice in a run {context}"
        assert len(set(attempts)) == len(attempts), f"{kind} {item}: an attempt twice {context}"
        assert in_order == sorted(in_order), f"{kind} {item}: attempts out of order {context}"
    return runs


def _dead_letters(
    report: dict[str, list[list[Any]]], poisons: set[str], context: str
) -> dict[str, str]:
    """The error of each dead letter, by message id, checked: only poison messages (to
    the poison target, reason `interrupted`), written again only in a later run."""
    found: dict[str, str] = {}
    written: dict[str, list[int]] = defaultdict(list)
    for message_id, target, reason, error, _, run in report["dead"]:
        letter = f"dead letter of {message_id} to {target} ({reason}: {error})"
        assert message_id in poisons and target == "poison", f"{letter} {context}"
        assert reason == "interrupted", f"{letter} {context}"
        assert run not in written[message_id], f"{letter} written twice in run {run} {context}"
        written[message_id].append(run)
        found[message_id] = str(error)
    return found


def _check_interrupted(what: str, error: str | None, seen: list[Any], context: str) -> None:
    """`error` says `what` exhausted its attempts by interruptions, at least as many as
    its runs `seen` and as the attempt limit."""
    match = INTERRUPTED.search(error or "")
    assert match is not None, f"{what} failed with {error!r} {context}"
    count = int(match.group(1))
    assert count >= max(len(seen), POISON_ATTEMPTS), f"{what}: {error!r}, {seen} {context}"
