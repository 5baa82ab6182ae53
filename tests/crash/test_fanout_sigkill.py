"""A fanout delivery cut short by SIGKILL while it ran alone used up its attempt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from ._kill import clock_start, run_child
from .fanout_child import MAX_ATTEMPTS

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("fanout_child.py")


@pytest.mark.parametrize("kind", ["dlq", "drop"])
def test_a_consumer_that_kills_its_process_exhausts_its_attempts(tmp_path: Path, kind: str) -> None:
    """Each kill inside deliver() of the message run alone counts an attempt; then it
    dead-letters (as `interrupted`) or drops. Its first delivery held one permit of ten
    (not alone), so that kill is spared, and it is delivered once more than its attempts."""
    data = tmp_path / "data"
    attempts: list[int] = []
    state: dict[str, object] | None = None
    for run in range(MAX_ATTEMPTS + 3):
        code, lines = run_child(CHILD, str(data), kind, clock_start(run))
        attempts += [int(line.split()[1]) for line in lines if line.startswith("deliver ")]
        if code == 0:
            state = json.loads(lines[-1].removeprefix("state "))
            break
    assert attempts == list(range(1, MAX_ATTEMPTS + 2))
    assert state is not None, "the message never left the queue"
    assert state["pending"] == 0
    if kind == "drop":
        assert state["dead"] == []
        return
    [dead] = cast(list[Any], state["dead"])
    assert (dead["messageId"], dead["attempts"]) == ("m-1", MAX_ATTEMPTS + 1)
    assert dead["failure"]["reason"] == "interrupted"
    assert f"({MAX_ATTEMPTS + 1} interrupted" in dead["failure"]["error"]["message"]
