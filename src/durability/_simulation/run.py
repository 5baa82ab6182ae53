"""`SimulationRun`: what a scenario drives (calls, requests, time) and invariants read."""

from __future__ import annotations

import asyncio
import json
import math
import random
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..runtime import ObjectStub, Request, Runtime
from .injector import Injector
from .ledger import Ledger
from .plan import Fault
from .state import StoredObject, stored_objects
from .trace import Trace, object_label, shown

if TYPE_CHECKING:
    from .._virtual_clock import VirtualClock


class SimulationHang(AssertionError):
    """A call or request of the scenario was still waiting after `max_call_ms` of virtual
    time with nothing left that could answer it."""


@dataclass(frozen=True, slots=True)
class Reply:
    """How a call or request of the scenario ended.

    `ok` is True when it returned (a request: when the worker answered, whatever the
    status); `value` is what a call returned, or a request's body (parsed when JSON);
    `status` is a request's HTTP status (0 when the worker raised); `error` is what was
    raised instead (a crash of the object reaches its caller as `ObjectEvictedError`).
    """

    ok: bool
    value: Any = None
    status: int = 0
    error: BaseException | None = None


class SimulationRun:
    """One seeded run of a scenario on a runtime under faults (see `Simulation`).

    The scenario gets it: `rng` for its random choices (seeded, so the run replays),
    `env` for stubs, `call` and `request` to act (each answers a `Reply`, and is traced),
    `advance` to move virtual time, `steps()` to loop over its steps, `seen` to keep what
    it observed for the invariants, `ledger` for what outside services did. Invariants
    get it too, after the scenario: `objects()` is what every object stored.
    """

    def __init__(
        self,
        *,
        seed: int,
        steps: int,
        clock: VirtualClock,
        injector: Injector,
        trace: Trace,
        max_call_ms: int,
        on_step: Callable[[SimulationRun], None],
    ) -> None:
        self.seed = seed
        """The seed of the run (its random choices and its faults)."""
        self.rng = random.Random(seed)
        """The scenario's random source: draw every choice from it."""
        self.clock = clock
        self.ledger = Ledger(clock.now_ms)
        """What outside services did, if the fakes record it (see `Ledger`)."""
        self.seen: dict[str, Any] = {}
        """What the scenario observed, for the invariants: any keys it likes."""
        self.memo: dict[str, Any] = {}
        """What invariants keep between steps (each under its own name)."""
        self.trace = trace
        self.step = 0
        """The step the scenario is at (0 before its first)."""
        self._steps = steps
        self.module: Any = None
        """The worker's entry module as loaded for this run (`None` for bindings alone):
        its functions and constants, or a function to replace for this run only."""
        self._runtime: Runtime | None = None
        self._fetch: Callable[[Request, Any], Any] | None = None
        self._injector = injector
        self._max_call_ms = max_call_ms
        self._on_step = on_step
        self._strikes: list[asyncio.Future[Any]] = []
        self._waiting: set[asyncio.Future[Any]] = set()
        self._driving = False
        self._opened: list[Callable[[], None]] = []

    def attach(
        self, runtime: Runtime, fetch: Callable[[Request, Any], Any] | None, module: Any
    ) -> None:
        """Host the run on `runtime` (started), serving requests with `fetch`."""
        self._runtime = runtime
        self._fetch = fetch
        self.module = module

    @property
    def runtime(self) -> Runtime:
        """The runtime the objects run on (a `Runtime` on the run's virtual clock)."""
        if self._runtime is None:
            raise RuntimeError("the run's runtime starts once the bindings are built")
        return self._runtime

    @property
    def env(self) -> Any:
        """The runtime's bindings: `run.env.NAME.get_by_name(...)` gives a stub."""
        return self.runtime.env

    @property
    def commits(self) -> int:
        """How many commits of turns that wrote the run has made so far."""
        return self._injector.plan.counts["commit"]

    @property
    def faults(self) -> list[Fault]:
        """The faults injected so far, in order."""
        return list(self._injector.plan.injected)

    def now_ms(self) -> int:
        """The virtual time."""
        return self.clock.now_ms()

    def steps(self) -> Iterator[int]:
        """The scenario's steps, numbered from 1 (a shrunk failure replays fewer)."""
        for number in range(1, self._steps + 1):
            self.step = number
            self.trace.add(f"step {number}")
            yield number
            self._on_step(self)

    def note(self, text: str) -> None:
        """Write `text` into the run's trace (what a failure prints)."""
        self.trace.add(text)

    def disarm(self) -> None:
        """Inject no more faults in this run (for a final phase that must not be cut)."""
        if self._injector.plan.armed:
            self._injector.plan.armed = False
            self.trace.add("faults off")

    async def advance(self, ms: int) -> None:
        """Move virtual time forward by `ms`, running everything that comes due; an
        eviction or crash of a live object may be timed inside the span."""
        self.trace.add(f"advance {ms} ms")
        fault = self._injector.advance(ms)
        if fault is not None:
            loop = asyncio.get_running_loop()
            loop.call_at(loop.time() + fault.params[0] / 1000, self._strike, fault)
        await self.clock.advance(ms)

    async def call(self, stub: ObjectStub, method: str, *args: Any, **kwargs: Any) -> Reply:
        """Call `method` of the object behind `stub`; its result or error as a `Reply`."""
        arguments = ", ".join([*map(shown, args), *(f"{k}={shown(v)}" for k, v in kwargs.items())])
        what = f"{object_label(stub.id)}.{method}({arguments})"
        ok, value = await self._finish(getattr(stub, method)(*args, **kwargs), what)
        if ok:
            self.trace.add(f"{what} -> {shown(value)}")
            return Reply(True, value)
        self.trace.add(f"{what} raised {type(value).__name__}")
        return Reply(False, error=value)

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """Send one HTTP request to the worker's `fetch` (`body`: JSON unless str/bytes)."""
        if self._fetch is None:
            raise RuntimeError("this simulation's worker has no fetch: use run.call(...)")
        text = body if isinstance(body, (str, bytes)) or body is None else json.dumps(body)
        request = Request(f"http://simulation{path}", method=method, body=text, headers=headers)
        what = f"{method} {path}"
        ok, response = await self._finish(self._fetch(request, self.env), what)
        if not ok:
            self.trace.add(f"{what} raised {type(response).__name__}")
            return Reply(False, error=response)
        raw = await response.text()
        is_json = response.headers.get("content-type", "").startswith("application/json")
        value = json.loads(raw) if is_json and raw else raw
        self.trace.add(f"{what} -> {response.status} {shown(value)}")
        return Reply(True, value, response.status)

    def objects(self) -> list[StoredObject]:
        """What every object of the runtime has stored now, sorted by namespace and id."""
        return stored_objects(self.runtime, self._opened)

    async def _finish(self, awaitable: Awaitable[Any], what: str) -> tuple[bool, Any]:
        """Run `awaitable` to its end, moving time to each timer while it waits.

        Calls and requests may run concurrently (`asyncio.gather` of several): the first
        one moves time while any of them waits, the others wait for their own end.
        """
        task = asyncio.ensure_future(awaitable)
        self._waiting.add(task)
        try:
            if self._driving:
                await asyncio.wait([task])
            else:
                self._driving = True
                try:
                    await self._drive(what)
                finally:
                    self._driving = False
        finally:
            self._waiting.discard(task)
        if task.cancelled():
            return False, asyncio.CancelledError()
        error = task.exception()
        return (False, error) if error is not None else (True, task.result())

    async def _drive(self, what: str) -> None:
        """Move time from timer to timer until every call in flight has ended."""
        clock = self.clock
        await clock.run_until_idle()
        deadline = clock.now_ms() + self._max_call_ms
        while any(not task.done() for task in self._waiting):
            patch = clock._patch
            when = None if patch is None else patch.next_timer()
            at = None if when is None else max(math.ceil(when * 1000), clock.now_ms())
            if at is None or at > deadline:
                for task in self._waiting:
                    task.cancel()
                raise SimulationHang(
                    f"{what} was still waiting after {self._max_call_ms} ms of virtual time"
                )
            await clock.advance_to(at)

    def _strike(self, fault: Fault) -> None:
        """An eviction or crash timed inside an advance: of a live object, if any."""
        live = self.runtime._live.instances()
        if not live:
            return
        instance = live[fault.params[1] % len(live)]
        self.trace.add(f"{fault.action} {object_label(instance.id)} (advance #{fault.number})")
        drop = self.runtime.crash if fault.action == "crash" else self.runtime.evict
        self._strikes.append(asyncio.ensure_future(drop(instance.id)))

    async def close(self) -> None:
        """Let evictions in flight end, and close what `objects()` opened."""
        if self._strikes:
            await asyncio.gather(*self._strikes, return_exceptions=True)
        for close in self._opened:
            close()
        self._opened.clear()
