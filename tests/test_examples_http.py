"""Each example project served by `durability serve examples/<name>`, checked over HTTP.

The checks live in `_example_checks` so that `scripts/workerd-smoke` runs the very same
ones against the projects on workerd.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from _example_checks import CHECKS
from _served import served

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.skipif(os.name != "posix", reason="stops the server with SIGINT")
@pytest.mark.parametrize("name", sorted(CHECKS))
def test_example_answers_over_http(name: str, tmp_path: Path) -> None:
    """`durability serve examples/<name>` serves the project; its HTTP checks pass."""
    with served(EXAMPLES / name, tmp_path / "data") as base:
        CHECKS[name](base)
