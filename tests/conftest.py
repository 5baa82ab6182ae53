"""Fixtures shared by the suites that must behave alike on every host."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from _cloudflare_double import BUILTIN, WORKERS_SDK, install

HOSTS = ["embedded", WORKERS_SDK, BUILTIN]


@pytest.fixture(params=HOSTS)
def host(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Where the objects of the test run: the embedded runtime as it is, or as on
    Cloudflare (each object's ctx is the Cloudflare double, which helpers adapt); no
    double may have seen a call Cloudflare would complain about."""
    name = str(request.param)
    if name == "embedded":
        yield name
        return
    doubles = install(monkeypatch, name)
    yield name
    assert [ctx.complaints for ctx in doubles if ctx.complaints] == []
