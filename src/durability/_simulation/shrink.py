"""Shrinking a failing run to a short one that fails the same way.

The failing run is replayed with its faults forced (the same run), then with fewer steps
(a binary search: the scenario's choices for the first steps do not change), then
without each fault in turn, newest first: a change is kept when the run still fails
with the same signature (where it failed, and the error's type). Every try is a whole
run, so a budget bounds them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from .outcome import Outcome
from .plan import Fault, Token

MAX_TRIES = 200
"""Runs one shrink may make."""


def shrink(run: Callable[[Token], Outcome], failed: Outcome) -> Outcome:
    """The shortest run found that fails like `failed`; `failed` itself if none is."""
    tries = 0

    def still_fails(token: Token) -> Outcome | None:
        nonlocal tries
        tries += 1
        outcome = run(token)
        if outcome.error is not None and outcome.signature == failed.signature:
            return outcome
        return None

    best = still_fails(failed.forced())
    if best is None:
        return failed  # not reproducible with its faults forced: report it as it ran
    low, high = 0, best.steps
    if best.where == "scenario" and 0 < best.step < high:
        shorter = still_fails(Token(best.token.seed, best.step, tuple(best.faults)))
        if shorter is not None:
            best, high = shorter, best.step
    while high - low > 1 and tries < MAX_TRIES:
        middle = (low + high) // 2
        shorter = still_fails(Token(best.token.seed, middle, tuple(best.faults)))
        if shorter is None:
            low = middle
        else:
            best, high = shorter, middle
    chunk = max(1, len(best.faults) // 2)
    while tries < MAX_TRIES:
        removed = False
        end = len(best.faults)
        while end > 0 and tries < MAX_TRIES:
            start = max(0, end - chunk)
            kept = best.faults[:start] + best.faults[end:]
            fewer = still_fails(Token(best.token.seed, best.steps, tuple(kept)))
            if fewer is None and chunk == 1:
                fewer = _shifted(still_fails, best, start, kept)
            if fewer is not None:
                best, removed = fewer, True
            end = start
        if chunk > 1:
            chunk //= 2
        elif not removed:
            break
    return best


SHIFTS = (-1, -2, -3, 1, 2, 3)
"""How far the later faults of a kind are moved when removing one of that kind renumbers
the points after it (a crash removed may remove the commits its retry made)."""


def _shifted(
    still_fails: Callable[[Token], Outcome | None],
    best: Outcome,
    removed: int,
    kept: list[Fault],
) -> Outcome | None:
    """Without fault number `removed` of `best`, the later faults of its kind moved by a
    few points: the first such run that still fails, if any."""
    kind = best.faults[removed].kind
    later = [index for index in range(removed, len(kept)) if kept[index].kind == kind]
    if not later:
        return None
    for shift in SHIFTS:
        moved = list(kept)
        for index in later:
            fault = kept[index]
            moved[index] = replace(fault, number=fault.number + shift)
        if min(moved[index].number for index in later) < 1:
            continue
        found = still_fails(Token(best.token.seed, best.steps, tuple(moved)))
        if found is not None:
            return found
    return None
