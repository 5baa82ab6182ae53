"""Fixtures of the runtime conformance suite: every test runs on both backends."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from durability.runtime import Runtime
from durability.testing import VirtualClock

RuntimeFactory = Callable[..., Runtime]


@pytest.fixture(params=["memory", "file"])
def backend(request: pytest.FixtureRequest) -> str:
    """Which storage the runtime under test uses."""
    return str(request.param)


@pytest.fixture
def make_runtime(backend: str, tmp_path: Path, clock: VirtualClock) -> RuntimeFactory:
    """Build a Runtime on the backend under test, driven by the virtual clock."""

    def make(bindings: Mapping[str, object], **options: Any) -> Runtime:
        path = tmp_path / "objects" if backend == "file" else None
        options.setdefault("clock", clock)
        return Runtime(path=path, bindings=bindings, **options)

    return make
