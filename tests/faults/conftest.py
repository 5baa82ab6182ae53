"""Fixtures of the storage-fault tests: the fault plan and a virtual clock."""

from __future__ import annotations

import pytest

from durability.testing import VirtualClock

from ._inject import StorageFaults


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> StorageFaults:
    """A fault plan wrapping every SQLite connection opened during the test."""
    return StorageFaults().install(monkeypatch)


@pytest.fixture
def clock() -> VirtualClock:
    """A fresh virtual clock."""
    return VirtualClock()
