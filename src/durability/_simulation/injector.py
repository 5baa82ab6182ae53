"""The simulation's faults: the runtime's fault points, the objects' awaits and the outside
calls ask one `Plan`; every fault injected is written to the trace.

Crashes at awaits come from a task factory on the run's loop: each task's coroutine is
stepped by `_Stepper`, which, whenever the coroutine suspends inside an object's call or
handler (the running object is in the task's context), asks the plan and may crash that
object right there, as `crash_point()` would.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
from collections.abc import Callable, Coroutine, Generator
from typing import Any

from .._faults import ColdAction
from ..runtime._faults import CommitFault, Faults
from ..runtime._ids import ObjectId
from ..runtime._instance import Instance, running_instance
from .plan import Fault, FaultRates, Plan
from .trace import Trace, object_label

_COMMIT_WORDS = {
    "crash": "crash {} before its commit",
    "crash_after": "crash {} after its commit (replies lost)",
    "fail": "fail the commit of {}",
}

OUTSIDE_ACTIONS = ("slow", "fail_before", "fail_after", "crash_before", "crash_after")


def pick(
    rng: random.Random, kind: str, number: int, choices: list[tuple[float, str]]
) -> Fault | None:
    """One draw: the action whose share of [0, 1) it falls in, or `None`."""
    draw = rng.random()
    for rate, action in choices:
        if draw < rate:
            return Fault(kind, number, action)
        draw -= rate
    return None


class Injector(Faults):
    """Answers the runtime's fault points from the run's plan, and traces each fault."""

    def __init__(self, plan: Plan, rates: FaultRates, trace: Trace) -> None:
        self.plan = plan
        self.rates = rates
        self.trace = trace

    def commit(self, object_id: ObjectId) -> CommitFault | None:
        rates = self.rates
        choices = [
            (rates.crash_before_commit, "crash"),
            (rates.crash_after_commit, "crash_after"),
            (rates.fail_commit, "fail"),
        ]
        fault = self.plan.point("commit", lambda rng, n: pick(rng, "commit", n, choices))
        if fault is None:
            return None
        words = _COMMIT_WORDS[fault.action].format(object_label(object_id))
        self.trace.add(f"{words} (commit #{fault.number})")
        action: CommitFault = "crash"
        if fault.action in ("crash_after", "fail"):
            action = "crash_after" if fault.action == "crash_after" else "fail"
        return action

    def set_alarm(self, object_id: ObjectId, scheduled_ms: int) -> None:
        choices = [(self.rates.fail_set_alarm, "fail")]
        fault = self.plan.point("set_alarm", lambda rng, n: pick(rng, "set_alarm", n, choices))
        if fault is not None:
            self.trace.add(f"fail set_alarm of {object_label(object_id)} (#{fault.number})")
            raise sqlite3.OperationalError("disk I/O error (injected into set_alarm)")

    def alarm_delay_ms(self, object_id: ObjectId, scheduled_ms: int) -> int:
        def choose(rng: random.Random, number: int) -> Fault | None:
            if rng.random() >= self.rates.late_alarm:
                return None
            return Fault("alarm", number, "late", (rng.randint(1, self.rates.max_alarm_delay_ms),))

        fault = self.plan.point("alarm", choose)
        if fault is None:
            return 0
        delay = fault.params[0] if fault.params else 0
        self.trace.add(f"deliver the alarm of {object_label(object_id)} {delay} ms late")
        return delay

    def cold_store(self, object_id: ObjectId | None, action: ColdAction) -> None:
        choices = [(self.rates.fail_cold_store, "fail")]
        fault = self.plan.point("cold", lambda rng, n: pick(rng, "cold", n, choices))
        if fault is not None:
            self.trace.add(f"fail the cold-store {action} of {object_label(object_id)}")
            raise OSError(f"cold store {action} failed (injected)")

    def outside(self, label: str, caller: ObjectId | None) -> Fault | None:
        """At a call to an outside service (by the object `caller`, if any): its fault."""
        inside = caller is not None
        rates = self.rates

        def choose(rng: random.Random, number: int) -> Fault | None:
            half = rates.fail_outside / 2
            crash = rates.crash_at_outside / 2 if inside else 0.0
            choices = [
                (rates.slow_outside, "slow"),
                (half, "fail_before"),
                (half, "fail_after"),
                (crash, "crash_before"),
                (crash, "crash_after"),
            ]
            fault = pick(rng, "outside", number, choices)
            if fault is not None and fault.action == "slow":
                delay = rng.randint(1, rates.max_outside_delay_ms)
                fault = Fault("outside", number, "slow", (delay,))
            return fault

        fault = self.plan.point("outside", choose)
        if fault is None or (fault.action.startswith("crash") and not inside):
            return None
        words = _outside_words(fault).format(object_label(caller))
        self.trace.add(f"{words} {label} (outside call #{fault.number})")
        return fault

    def at_await(self, instance: Instance) -> None:
        """At a suspension inside `instance`'s work: crash it there, if the plan says so."""
        choices = [(self.rates.crash_at_await, "crash")]
        fault = self.plan.point("await", lambda rng, n: pick(rng, "await", n, choices))
        if fault is not None:
            self.trace.add(f"crash {object_label(instance.id)} at an await (#{fault.number})")
            instance.host.crash(instance)

    def advance(self, span_ms: int) -> Fault | None:
        """At an advance of `span_ms`: an eviction or crash to time inside it, if any."""

        def choose(rng: random.Random, number: int) -> Fault | None:
            if span_ms <= 0 or rng.random() >= self.rates.evict:
                return None
            action = rng.choice(("evict", "crash"))
            return Fault("advance", number, action, (rng.randrange(span_ms), rng.randrange(1000)))

        return self.plan.point("advance", choose)


def _outside_words(fault: Fault) -> str:
    match fault.action:
        case "slow":
            return f"delay by {fault.params[0] if fault.params else 0} ms"
        case "fail_before":
            return "fail, before its effect,"
        case "fail_after":
            return "fail, after its effect,"
        case "crash_before":
            return "crash {} just before"
        case _:
            return "crash {} just after"


def install_stepper(loop: asyncio.AbstractEventLoop, injector: Injector) -> None:
    """Make every task created on `loop` from now on step through `_Stepper`."""

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Future[Any]:
        if asyncio.iscoroutine(coro):
            coro = _Stepper(coro, injector.at_await)
        return asyncio.Task(coro, loop=loop, **kwargs)

    loop.set_task_factory(factory)


class _Stepper(Coroutine[Any, Any, Any]):
    """A task's coroutine, asked about at each of its suspensions inside an object's work.

    It is the task's coroutine itself (a `Coroutine` the task sends to and throws into),
    so it adds no frame; a task cancelled before it started closes the wrapped one.
    """

    __slots__ = ("_at_await", "_coro")

    def __init__(
        self, coro: Coroutine[Any, Any, Any], at_await: Callable[[Instance], None]
    ) -> None:
        self._coro = coro
        self._at_await = at_await

    def send(self, value: Any) -> Any:
        yielded = self._coro.send(value)
        self._suspended()
        return yielded

    def throw(self, error: Any, value: Any = None, traceback: Any = None) -> Any:
        if value is not None or traceback is not None:
            error = value if value is not None else error
        yielded = self._coro.throw(error)
        self._suspended()
        return yielded

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, Any, Any]:
        return self._coro.__await__()

    def _suspended(self) -> None:
        instance = running_instance()
        if isinstance(instance, Instance) and not instance.gone:
            self._at_await(instance)
