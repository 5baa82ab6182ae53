"""Fixtures shared by the suites that must behave alike on every host."""

from __future__ import annotations

import pytest

from _cloudflare_double import BUILTIN, WORKERS_SDK, install

HOSTS = ["embedded", WORKERS_SDK, BUILTIN]


@pytest.fixture(params=HOSTS)
def host(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Where the objects of the test run: the embedded runtime as it is, or as on
    Cloudflare (each object's ctx is the Cloudflare double, which helpers adapt)."""
    name = str(request.param)
    if name != "embedded":
        install(monkeypatch, name)
    return name
