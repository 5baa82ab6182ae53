"""The pytest plugin (the `testing` extra) in a user's project, run through pytester."""

from __future__ import annotations

import pytest

from conftest import AS_A_USER

pytestmark = pytest.mark.slow

pytest_plugins = ["pytester"]

COUNTER = """
import durability
from durability.runtime import DurableObject

DAY_MS = 86_400_000


class Counter(DurableObject):
    async def increment(self) -> int:
        value = (await self.ctx.storage.get("n") or 0) + 1
        await self.ctx.storage.put("n", value)
        return value

    async def reset_tomorrow(self) -> None:
        await self.ctx.storage.set_alarm(durability.now_ms() + DAY_MS)

    async def alarm(self, info=None) -> None:
        await self.ctx.storage.delete("n")
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A user's project: a counter module and the one line of pytest configuration."""
    pytester.makepyfile(counter=COUNTER)
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nasyncio_mode = "auto"\n')
    return pytester


def test_runtime_fixture_uses_the_bindings_fixture(project: pytest.Pytester) -> None:
    """`runtime` is started with `durability_bindings` and follows `virtual_clock`."""
    project.makepyfile(
        test_counter="""
        import pytest
        from counter import DAY_MS, Counter

        @pytest.fixture
        def durability_bindings():
            return {"COUNTERS": Counter}

        async def test_alarm_resets(runtime, virtual_clock):
            counter = runtime.env.COUNTERS.get_by_name("a")
            assert await counter.increment() == 1
            await counter.reset_tomorrow()
            await virtual_clock.advance(DAY_MS)
            assert await counter.increment() == 1

        def test_clock_starts_at_the_default(virtual_clock):
            assert virtual_clock.now_ms() == 1_700_000_000_000
        """
    )
    project.runpytest_subprocess(*AS_A_USER).assert_outcomes(passed=2)


def test_durability_path_keeps_files(project: pytest.Pytester) -> None:
    """Overriding `durability_path` gives a file-backed runtime under that path."""
    project.makepyfile(
        test_files="""
        import pytest
        from counter import Counter

        @pytest.fixture
        def durability_bindings():
            return {"COUNTERS": Counter}

        @pytest.fixture
        def durability_path(tmp_path):
            return tmp_path / "data"

        async def test_files(runtime, durability_path):
            await runtime.env.COUNTERS.get_by_name("a").increment()
            assert list((durability_path / "COUNTERS").glob("*.sqlite3"))
        """
    )
    project.runpytest_subprocess(*AS_A_USER).assert_outcomes(passed=1)


def test_make_runtime_restart_and_options(project: pytest.Pytester) -> None:
    """`durability_options` reaches `runtime` and `make_runtime` (keywords given win),
    `restart()` starts the next runtime on the same files, and a runtime a test leaves
    running is closed after it (its path is free for the next test)."""
    project.makepyfile(
        test_runtimes="""
        import pytest
        from counter import Counter

        @pytest.fixture
        def durability_bindings():
            return {"COUNTERS": Counter}

        @pytest.fixture
        def durability_path(tmp_path_factory):
            return tmp_path_factory.getbasetemp() / "shared"

        @pytest.fixture
        def durability_options():
            return {"max_live_objects": 3}

        async def test_options(runtime, make_runtime, tmp_path):
            assert runtime.max_live_objects == 3
            async with make_runtime(path=tmp_path, max_live_objects=5) as other:
                assert (other.max_live_objects, other.path) == (5, tmp_path)

        async def test_restart_keeps_files(runtime, restart):
            await runtime.env.COUNTERS.get_by_name("a").increment()
            again = await restart()
            assert again is not runtime
            assert await again.env.COUNTERS.get_by_name("a").increment() == 2

        async def test_left_running(make_runtime):
            await make_runtime().start()

        async def test_path_is_free_again(runtime):
            assert await runtime.env.COUNTERS.get_by_name("a").increment() == 3
        """
    )
    project.runpytest_subprocess(*AS_A_USER).assert_outcomes(passed=4)


def test_a_session_that_builds_no_runtime_imports_none(project: pytest.Pytester) -> None:
    """The plugin keeps a session light: neither the runtime nor the simulations are
    imported until a test needs them (a fixture that builds a runtime, a simulation)."""
    project.makepyfile(
        test_light="""
        import sys

        def test_light(virtual_clock):
            assert virtual_clock.now_ms() == 1_700_000_000_000
            assert "durability.runtime" not in sys.modules
            assert "durability._simulation" not in sys.modules
        """
    )
    project.runpytest_subprocess(*AS_A_USER).assert_outcomes(passed=1)


def test_runtime_without_bindings_says_what_to_define(project: pytest.Pytester) -> None:
    """Using `runtime` without a `durability_bindings` fixture errors with the fix."""
    project.makepyfile(
        test_missing="""
        async def test_needs_bindings(runtime):
            pass
        """
    )
    result = project.runpytest_subprocess(*AS_A_USER)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*define a fixture `durability_bindings`*"])


def test_bindings_fixture_can_live_in_conftest(project: pytest.Pytester) -> None:
    """A `durability_bindings` fixture in conftest.py serves every test module."""
    project.makeconftest(
        """
        import pytest
        from counter import Counter

        @pytest.fixture
        def durability_bindings():
            return {"COUNTERS": Counter}
        """
    )
    project.makepyfile(
        test_one="""
        async def test_one(runtime):
            assert await runtime.env.COUNTERS.get_by_name("x").increment() == 1
        """
    )
    project.runpytest_subprocess(*AS_A_USER).assert_outcomes(passed=1)


def test_fixtures_work_in_strict_mode_with_the_marker(pytester: pytest.Pytester) -> None:
    """Without `asyncio_mode = "auto"`, a test marked `asyncio` gets a working `runtime`."""
    pytester.makepyfile(counter=COUNTER)
    pytester.makepyfile(
        test_strict="""
        import pytest
        from counter import Counter

        @pytest.fixture
        def durability_bindings():
            return {"COUNTERS": Counter}

        @pytest.mark.asyncio
        async def test_counts(runtime):
            assert await runtime.env.COUNTERS.get_by_name("a").increment() == 1
        """
    )
    pytester.runpytest_subprocess(*AS_A_USER).assert_outcomes(passed=1)


def test_runtime_without_pytest_asyncio_says_what_to_install(project: pytest.Pytester) -> None:
    """Without pytest-asyncio, using `runtime` fails with one line naming the extra to install."""
    project.makepyfile(
        pytest_asyncio="raise ImportError(\"No module named 'pytest_asyncio'\")",
        test_counts="""
        async def test_counts(runtime):
            pass

        def test_sync(runtime):
            pass

        def test_clock(virtual_clock):
            assert virtual_clock.now_ms() == 1_700_000_000_000
        """,
    )
    result = project.runpytest_subprocess(*AS_A_USER, "-p", "no:asyncio")
    result.assert_outcomes(passed=1, errors=2)
    message = (
        "the `runtime` fixture needs pytest-asyncio, which is not installed: "
        "pip install 'durability-objects[testing]'"
    )
    assert result.stdout.lines.count(message) == 2
    result.stdout.no_fnmatch_line("*fixture 'runtime' not found*")


SIGNUPS = """
from durability import Durable, workflow
from durability.runtime import DurableObject


class Signups(Durable, DurableObject):
    @workflow
    async def welcome(self, event, step):
        @step.do("send welcome")
        async def send():
            return "sent to " + event.payload["email"]

        sent = await send()
        await step.sleep("wait a week", "7 days")
        reply = await step.wait_for_event("reply", "replied", timeout="1 day")
        return [sent, reply.payload]

    async def sign_up(self, email):
        await self.welcome.create(id="u1", params={"email": email})
"""


def test_workflows_fixture_sends_events_and_moves_time(project: pytest.Pytester) -> None:
    """`workflows` sends an instance events and runs it from wake-up to wake-up."""
    project.makepyfile(signups=SIGNUPS)
    project.makepyfile(
        test_signups="""
        import pytest
        from signups import Signups

        @pytest.fixture
        def durability_bindings():
            return {"SIGNUPS": Signups}

        async def test_welcome(runtime, workflows):
            stub = runtime.env.SIGNUPS.get_by_name("shop")
            await stub.sign_up("ann@example.com")
            waiting = await workflows.run_until(stub, "u1", ["waiting"])
            assert waiting.status == "waiting"
            await workflows.advance(7 * 86_400_000)
            await workflows.send_event(stub, "u1", "replied", {"thanks": True})
            done = await workflows.run_until(stub, "u1")
            assert done.output == ["sent to ann@example.com", {"thanks": True}]
            assert (await workflows.status(stub, "u1")).status == "complete"
        """
    )
    project.runpytest_subprocess(*AS_A_USER).assert_outcomes(passed=1)


SIMULATED = """
from durability.testing import FaultRates, Simulation
from counter import Counter

SEEDS_RUN = []


async def scenario(run):
    SEEDS_RUN.append(run.seed)
    counter = run.env.COUNTERS.get_by_name("a")
    for _ in run.steps():
        await run.call(counter, "increment")
    assert run.seed != 3, "seed 3 is refused"


simulation = Simulation({"COUNTERS": Counter}, scenario, rates=FaultRates(evict=0), steps=5)


def test_simulated():
    simulation.check(seeds=2)
    print("seeds run:", SEEDS_RUN)
    assert SEEDS_RUN == [0, 1]
"""


def test_simulation_options_replay_one_run_or_run_more_seeds(project: pytest.Pytester) -> None:
    """`--durability-seeds=N` runs seeds 0 to N-1 (a failing one names the command that
    replays it), and `--durability-seed=TOKEN` runs exactly that run."""
    project.makepyfile(test_simulated=SIMULATED)
    project.runpytest_subprocess(*AS_A_USER).assert_outcomes(passed=1)
    more = project.runpytest_subprocess(*AS_A_USER, "--durability-seeds=5")
    more.assert_outcomes(failed=1)
    more.stdout.fnmatch_lines(
        [
            "*simulation failed with seed 3 in the scenario*",
            "*shrunk from 5 steps and 0 faults to 1 step and 0 faults*",
            "*replay: pytest test_simulated.py::test_simulated --durability-seed=3:1:",
        ]
    )
    token = next(
        line.split("--durability-seed=")[1].strip()
        for line in more.outlines
        if "--durability-seed=" in line
    )
    again = project.runpytest_subprocess(*AS_A_USER, f"--durability-seed={token}")
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines(["*simulation failed with seed 3 in the scenario*"])
    one = project.runpytest_subprocess(*AS_A_USER, "--durability-seed=1")
    one.assert_outcomes(failed=1)
    one.stdout.fnmatch_lines(["seeds run: [[]1[]]"])
