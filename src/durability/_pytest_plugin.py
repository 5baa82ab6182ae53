"""The pytest plugin of the `testing` extra: `virtual_clock`, `runtime`, `make_runtime`,
`restart` and `workflows` fixtures, and the options of simulations.

Installed as a `pytest11` entry point, so it loads in any project that has durability
and pytest. `runtime` is a running in-memory `Runtime` on `virtual_clock`; it takes
its bindings from the `durability_bindings` fixture, its path from `durability_path`
(`None`: in memory) and any other `Runtime` keywords from `durability_options`, which
a test module or `conftest.py` overrides. `make_runtime(**keywords)` builds more
runtimes like it (keywords given win), and `restart()` closes the running one and
starts the next on the same path and clock. `workflows` is a `WorkflowDriver` on
`runtime` and `virtual_clock`: it sends workflow instances events and moves time to
their next wake-ups. Without pytest-asyncio, the fixtures that build runtimes fail the
test with one line saying what to install (pytest alone would only say the fixture is
not found); `virtual_clock` works either way.
The runtime is imported only when a test builds one.

`--durability-seed=TOKEN` makes every `Simulation.check` of the session run only the run
`TOKEN` names (as a failure prints it); `--durability-seeds=N` makes each run seeds 0 to
N-1 instead of its own.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ._distribution import install_hint
from ._virtual_clock import VirtualClock

if TYPE_CHECKING:
    from ._workflow_driver import WorkflowDriver
    from .runtime import Runtime

_SESSION = "durability._simulation.session"


def pytest_addoption(parser: pytest.Parser) -> None:
    """The simulation options (see the module docstring)."""
    group = parser.getgroup("durability", "durability simulations")
    group.addoption(
        "--durability-seed",
        metavar="TOKEN",
        default=None,
        help="run only this simulation run (a seed, or the token a failure printed)",
    )
    group.addoption(
        "--durability-seeds",
        metavar="N",
        type=int,
        default=None,
        help="run seeds 0 to N-1 in every simulation instead of its own",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Hand the simulation options to every `Simulation` of the session. Without them,
    and before any simulation was imported, there is nothing to hand over: the
    simulations (and the runtime) stay unimported until a test needs them."""
    replay = config.getoption("--durability-seed")
    seeds = config.getoption("--durability-seeds")
    if seeds is not None and seeds < 1:
        raise pytest.UsageError("--durability-seeds must be a positive number")
    if replay is None and seeds is None and _SESSION not in sys.modules:
        return
    from ._simulation.session import OPTIONS

    config.stash[_PREVIOUS] = (OPTIONS.replay, OPTIONS.seeds)
    OPTIONS.replay = replay
    OPTIONS.seeds = seeds


def pytest_unconfigure(config: pytest.Config) -> None:
    """Give back the options of an enclosing session (pytester runs sessions in one)."""
    previous = config.stash.get(_PREVIOUS, None)
    if previous is not None:
        from ._simulation.session import OPTIONS

        OPTIONS.replay, OPTIONS.seeds = previous


_PREVIOUS = pytest.StashKey[tuple[str | None, int | None]]()


@pytest.fixture
def virtual_clock() -> VirtualClock:
    """A fresh `VirtualClock` at its default start (1_700_000_000_000 ms)."""
    return VirtualClock()


@pytest.fixture
def durability_bindings() -> Mapping[str, object]:
    """The bindings of the `runtime` fixture: override it to name your classes."""
    pytest.fail(
        "the `runtime` fixture needs your bindings: define a fixture "
        "`durability_bindings` returning them, e.g. {'COUNTERS': Counter}, in the test "
        "module or conftest.py",
        pytrace=False,
    )


@pytest.fixture
def durability_path() -> str | Path | None:
    """Where the `runtime` fixture keeps its files: `None` (in memory) unless overridden."""
    return None


@pytest.fixture
def durability_options() -> Mapping[str, object]:
    """Further `Runtime` keywords of `runtime` and `make_runtime` (e.g. `faults`,
    `idle_evict_ms`): none unless overridden."""
    return {}


try:
    import pytest_asyncio
except ImportError:  # the `testing` extra brings it

    @pytest.fixture(name="runtime")
    def _runtime_without_pytest_asyncio() -> None:
        """Stands in for the `runtime` fixture where pytest-asyncio is missing: says so."""
        _needs_pytest_asyncio("runtime")

    @pytest.fixture(name="workflows")
    def _workflows_without_pytest_asyncio() -> None:
        """Stands in for the `workflows` fixture where pytest-asyncio is missing: says so."""
        _needs_pytest_asyncio("workflows")

    @pytest.fixture(name="make_runtime")
    def _make_runtime_without_pytest_asyncio() -> None:
        """Stands in for the `make_runtime` fixture where pytest-asyncio is missing: says so."""
        _needs_pytest_asyncio("make_runtime")

    @pytest.fixture(name="restart")
    def _restart_without_pytest_asyncio() -> None:
        """Stands in for the `restart` fixture where pytest-asyncio is missing: says so."""
        _needs_pytest_asyncio("restart")

    def _needs_pytest_asyncio(fixture: str) -> None:
        pytest.fail(
            f"the `{fixture}` fixture needs pytest-asyncio, which is not installed: "
            + install_hint("testing"),
            pytrace=False,
        )

else:

    @pytest_asyncio.fixture
    async def make_runtime(
        request: pytest.FixtureRequest,
        virtual_clock: VirtualClock,
        durability_path: str | Path | None,
        durability_options: Mapping[str, object],
    ) -> AsyncIterator[Callable[..., Runtime]]:
        """Builds runtimes (not started: `async with make_runtime() as rt:`) as `runtime`
        is built; keywords given replace the fixtures' (`bindings=`, `path=`, `faults=`...).
        Every one still running after the test is closed then."""
        from .runtime import Runtime  # here, so a session that never asks pays nothing

        made: list[Runtime] = []

        def make(**keywords: Any) -> Runtime:
            if "bindings" not in keywords:
                keywords["bindings"] = request.getfixturevalue("durability_bindings")
            built = Runtime(
                **{
                    "path": durability_path,
                    "clock": virtual_clock,
                    **durability_options,
                    **keywords,
                }
            )
            made.append(built)
            return built

        yield make
        for built in made:
            await built.close()

    @pytest_asyncio.fixture
    async def runtime(
        make_runtime: Callable[..., Runtime], durability_bindings: Mapping[str, object]
    ) -> AsyncIterator[Runtime]:
        """A started `Runtime` on `virtual_clock`, closed after the test."""
        async with make_runtime(bindings=durability_bindings) as started:
            yield started

    @pytest.fixture
    def restart(
        runtime: Runtime, make_runtime: Callable[..., Runtime]
    ) -> Callable[..., Awaitable[Runtime]]:
        """`await restart()` closes the running runtime (`runtime` first, then the last
        one it started) and starts and returns a new one built by `make_runtime`: the
        same path, clock and bindings unless keywords say otherwise."""
        running = [runtime]

        async def restart(**keywords: Any) -> Runtime:
            await running[-1].close()
            started = make_runtime(**keywords)
            await started.start()
            running.append(started)
            return started

        return restart

    @pytest_asyncio.fixture
    async def workflows(runtime: Runtime, virtual_clock: VirtualClock) -> WorkflowDriver:
        """A `WorkflowDriver` for the workflows of `runtime`'s objects and bindings."""
        from ._workflow_driver import WorkflowDriver

        return WorkflowDriver(runtime, virtual_clock)
