"""One simulation run, start to end: a fresh event loop, a virtual clock, the worker loaded
anew, a runtime whose faults and tasks answer to the run's plan, the scenario, a quiet
period, then the invariants.

Everything random in a run comes from its seed: the scenario's choices (`run.rng`), the
faults (their own generator), the library's jitter (the global `random`, seeded for the
run and restored after) and its random ids (drawn from a seeded source for the run).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import sys
import tempfile
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from .._uuid import draw_from
from ..runtime import DurableObject, Request, Runtime
from .injector import Injector, install_stepper
from .invariants import Invariant, name_of
from .outcome import Outcome
from .outside import Outside, is_service
from .plan import FaultRates, Plan, Token
from .run import SimulationRun
from .trace import Trace

Scenario = Callable[[SimulationRun], Awaitable[None]]
"""A scenario: an async function of the run that drives the worker (see `Simulation`)."""
Bindings = Callable[[SimulationRun], Mapping[str, object]]


@dataclass(frozen=True)
class Setup:
    """What every run of one simulation shares."""

    worker: str | os.PathLike[str] | Mapping[str, object]
    scenario: Scenario
    invariants: tuple[Invariant, ...]
    bindings: Bindings | None
    rates: FaultRates
    steps: int
    settle_ms: int
    max_call_ms: int
    files: bool
    outside: Collection[str] | None


class _InvariantFailed(Exception):
    """An invariant failed while observing a step (carries its name and error)."""

    def __init__(self, name: str, error: BaseException) -> None:
        super().__init__(name)
        self.name = name
        self.error = error


def run_once(setup: Setup, token: Token) -> Outcome:
    """Run the scenario once as `token` says, on a loop of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "a Simulation runs each seed on an event loop of its own: call check() or "
            "exhaust() from a plain test function, not an async one"
        )
    saved = random.getstate()
    random.seed(token.seed)
    draw_from(random.Random(f"durability-ids:{token.seed}").randbytes)
    try:
        with asyncio.Runner() as runner:
            return runner.run(_run(setup, token))
    finally:
        draw_from(None)
        random.setstate(saved)


def _load(
    setup: Setup,
) -> tuple[dict[str, object], Callable[[Request, Any], Any] | None, Any]:
    """The worker's bindings, its `fetch` (if any), and the loaded worker (or `None`)."""
    if isinstance(setup.worker, Mapping):
        return dict(setup.worker), None, None
    from ..runtime.server import load_worker

    worker = load_worker(os.fspath(setup.worker))
    return dict(worker.bindings), worker.fetch, worker


async def _run(setup: Setup, token: Token) -> Outcome:
    from .._virtual_clock import VirtualClock

    clock = VirtualClock()
    trace = Trace(clock.now_ms)
    plan = Plan(token.seed, token.faults)
    injector = Injector(plan, setup.rates, trace)
    install_stepper(asyncio.get_running_loop(), injector)
    steps = token.steps if token.steps is not None else setup.steps

    def observe(run: SimulationRun) -> None:
        for invariant in setup.invariants:
            watch = getattr(invariant, "observe", None)
            if watch is not None:
                try:
                    watch(run)
                except Exception as error:
                    raise _InvariantFailed(name_of(invariant), error) from error

    run = SimulationRun(
        seed=token.seed,
        steps=steps,
        clock=clock,
        injector=injector,
        trace=trace,
        max_call_ms=setup.max_call_ms,
        on_step=observe,
    )
    outcome = Outcome(token, steps, plan.injected, plan.counts, plan.armed_counts, [])
    bindings, fetch, worker = _load(setup)
    if setup.bindings is not None:
        bindings.update(setup.bindings(run))
    for name, value in bindings.items():
        chosen = setup.outside is None or name in setup.outside
        if chosen and not _is_object_class(value) and is_service(value):
            bindings[name] = Outside(value, name, injector)
    with contextlib.ExitStack() as stack:
        folder = None
        if setup.files:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="durability-sim-"))
        runtime = Runtime(path=folder, bindings=bindings, clock=clock, faults=injector)
        await runtime.start()
        run.attach(runtime, fetch, _module_of(worker))
        try:
            await _play(setup, run, worker, outcome)
        finally:
            try:
                if worker is not None and worker.settle is not None:
                    await worker.settle()
                await runtime.close()
            except Exception as error:
                if outcome.error is None:
                    outcome.error, outcome.where = error, "close"
            await run.close()
    outcome.trace = trace.lines()
    outcome.step = run.step
    return outcome


async def _play(setup: Setup, run: SimulationRun, worker: Any, outcome: Outcome) -> None:
    """The scenario, the quiet period, then the invariants; the first failure is kept."""
    __tracebackhide__ = True  # a failure's traceback starts in the user's code
    try:
        if worker is not None and worker.start is not None:
            await worker.start(run.env)
        await setup.scenario(run)
        run.disarm()
        run.note(f"quiet for {setup.settle_ms} ms")
        await run.clock.advance(setup.settle_ms)
        for invariant in setup.invariants:
            outcome.where = name_of(invariant)
            invariant(run)
        outcome.where = ""
    except _InvariantFailed as failed:
        outcome.error, outcome.where = failed.error, failed.name
    except Exception as error:
        outcome.error = error
        outcome.where = outcome.where or "scenario"
    if outcome.error is not None:
        run.note(f"failed in {outcome.where}: {outcome.error!r}")


def _is_object_class(value: object) -> bool:
    return isinstance(value, type) and issubclass(value, DurableObject)


def _module_of(worker: Any) -> Any:
    """The entry module of a loaded worker (a project's `main`, or the module itself)."""
    if worker is None:
        return None
    project = getattr(worker, "project", None)
    if project is not None:
        return project.module
    return sys.modules.get(worker.name)
