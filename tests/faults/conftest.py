"""Fixtures of the storage-fault tests: the fault plan."""

from __future__ import annotations

import pytest

from ._inject import StorageFaults


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> StorageFaults:
    """A fault plan wrapping every SQLite connection opened during the test."""
    return StorageFaults().install(monkeypatch)
