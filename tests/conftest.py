"""What every test shares: the one start time, a virtual clock, a live object's ctx, and
the host the objects of the host-independent suites run on (the plugin's `runtime`,
`make_runtime` and `restart` build their runtimes there)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, TypeAlias

import pytest

import durability
from _cloudflare_double import install
from _hosts import HOSTS, hosted, hosting
from durability.cloudflare import adapt
from durability.runtime import AlarmInvocationInfo, DurableObject, ObjectStub, Runtime
from durability.testing import VirtualClock

START_MS = 1_700_000_000_000
"""Where every test's virtual clock starts (the VirtualClock default)."""

MakeRuntime: TypeAlias = Callable[..., Runtime]
"""The type of the plugin's `make_runtime` fixture."""

Restart: TypeAlias = Callable[..., Awaitable[Runtime]]
"""The type of the plugin's `restart` fixture."""

AS_A_USER = ("-p", "no:hypothesispytest", "-p", "no:anyio")
"""pytest arguments for a session run as in a user's project: with the plugins of the
`testing` extra, not those of the dev tools (hypothesis's and anyio's only slow it)."""

DURABILITY_TABLES = "SELECT name FROM sqlite_master WHERE name LIKE 'durability%' ORDER BY name"


@pytest.fixture(params=HOSTS)
def host(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Where the objects of the test run: the embedded runtime as it is, or as on
    Cloudflare (each object's ctx is the Cloudflare double, which helpers adapt); no
    double may have seen a call Cloudflare would complain about."""
    name = str(request.param)
    if name == "embedded":
        yield name
        return
    platform = install(monkeypatch, name)
    with hosting(platform):
        yield name
    assert [ctx.complaints for ctx in platform.made if ctx.complaints] == []


@pytest.fixture
def durability_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The plugin's runtimes host their objects on the test's `host`, if it has one."""
    if "host" in request.fixturenames:
        request.getfixturevalue("host")
    return hosted()


@pytest.fixture
def clock(virtual_clock: VirtualClock) -> VirtualClock:
    """The test's virtual clock (the plugin's `virtual_clock`), at START_MS."""
    return virtual_clock


def noop(_: Any) -> None:
    """A handler that does nothing."""


class Holder(DurableObject):
    """An object that hands its `ctx` to the test, so helpers can be built on it directly."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self.probe: SimpleNamespace = env["PROBE"]
        self.probe.ctx = ctx

    def now(self) -> int:
        """`durability.now_ms()` as seen inside the object."""
        return durability.now_ms()

    def echo(self, value: Any) -> Any:
        """The argument, copied both ways as JSON."""
        return value

    async def fail(self) -> None:
        """Raise an exception the caller must see with its class and message."""
        raise KeyError("missing")

    async def _hidden(self) -> None:
        """Private: stubs must refuse it."""

    async def alarm(self, info: AlarmInvocationInfo | None = None) -> None:
        """Record the delivery: when it ran and with what platform info."""
        self.probe.alarms.append((durability.now_ms(), info))


@dataclass
class LiveObject:
    """A running runtime, its clock, and one live `Holder` whose ctx the test uses."""

    runtime: Runtime
    clock: VirtualClock
    probe: SimpleNamespace
    stub: ObjectStub

    @property
    def ctx(self) -> Any:
        return self.probe.ctx

    def tables(self) -> list[str]:
        sql = adapt(self.ctx).storage.sql
        return [row["name"] for row in sql.exec(DURABILITY_TABLES)]


@pytest.fixture
async def live(clock: VirtualClock, make_runtime: MakeRuntime) -> AsyncIterator[LiveObject]:
    """An in-memory runtime on a virtual clock with one live object."""
    probe = SimpleNamespace(ctx=None, alarms=[])
    async with make_runtime(bindings={"OBJ": Holder, "PROBE": probe}, path=None) as runtime:
        stub = runtime.env.OBJ.get_by_name("live")
        await stub.now()
        yield LiveObject(runtime, clock, probe, stub)
