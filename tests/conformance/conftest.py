"""Fixtures of the runtime conformance suite: every test runs on both backends."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(params=["memory", "file"])
def durability_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path | None:
    """The storage of the runtimes under test (the plugin's `runtime` and `make_runtime`):
    in memory, or in files under `tmp_path`."""
    return tmp_path / "objects" if request.param == "file" else None
