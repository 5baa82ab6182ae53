"""What the test session asks of every simulation: one run to replay, or how many seeds.

The pytest plugin fills `OPTIONS` from `--durability-seed` and `--durability-seeds`;
outside pytest the environment variables `DURABILITY_SEED` and `DURABILITY_SEEDS` do.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

SEED_VARIABLE = "DURABILITY_SEED"
SEEDS_VARIABLE = "DURABILITY_SEEDS"


@dataclass
class SessionOptions:
    """`replay`: a token every simulation runs instead of its seeds; `seeds`: how many
    seeds (0, 1, ...) every simulation runs instead of its own."""

    replay: str | None = None
    seeds: int | None = None


OPTIONS = SessionOptions()
"""Set by the pytest plugin at the start of a session."""


def replay_token() -> str | None:
    """The run to replay, if the session or the environment names one."""
    return OPTIONS.replay or os.environ.get(SEED_VARIABLE) or None


def seed_count() -> int | None:
    """How many seeds to run instead of a simulation's own, if the session says."""
    if OPTIONS.seeds is not None:
        return OPTIONS.seeds
    text = os.environ.get(SEEDS_VARIABLE)
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{SEEDS_VARIABLE} must be a positive whole number, got {text!r}")
    return int(text)


def replay_command(token: str) -> str:
    """The command that replays `token`: the running pytest test with `--durability-seed`,
    or the environment variable outside pytest."""
    current = os.environ.get("PYTEST_CURRENT_TEST")
    if current:
        test = current.rsplit(" (", 1)[0]
        return f"pytest {shlex.quote(test)} --durability-seed={token}"
    return f"{SEED_VARIABLE}={token} <the command that ran this simulation>"
