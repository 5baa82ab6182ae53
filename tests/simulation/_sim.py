"""The deterministic simulation driver: one example project, one seed, seeded faults.

A `Simulation` serves an example project (`examples/<name>`) from a file-backed
Runtime on a VirtualClock. Everything random (which request, how far the clock moves,
which object fails and how, and the library's own jitter) comes from the seed, and
nothing reads the wall clock, so a seed replays exactly: the same requests, the same faults at the
same virtual times, the same trace.

Faults are the runtime's own: `strike()` evicts or crashes an object between calls,
and every object class is wrapped so that, now and then, an object crashes just after
one of its methods (or its `alarm()`) returned: after its effect, before the output
gate committed it, so the writes are lost and the caller sees an error, as when a
process dies between a handler's effect and its completion record.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import random
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from durability.runtime import DurableObject, Request, Runtime
from durability.runtime.server import load_worker
from durability.testing import VirtualClock

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
IN_FLIGHT_STEP_MS = 50
"""While a request waits on time, the clock moves in steps this long."""


class Simulation:
    """A served example, its clock, its seeded random source, its faults and its trace."""

    def __init__(self, seed: int, *, crash_after_effect: float) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        # The library's own jitter (retry backoff) draws from the global generator.
        self._global_state = random.getstate()
        random.seed(seed)
        self.clock = VirtualClock()
        self.crash_after_effect = crash_after_effect
        self.faults: Counter[str] = Counter()
        self.trace: list[str] = []
        self.requests = 0
        self.struck: dict[str, list[int]] = {}
        """Object name -> the virtual times it was evicted or crashed."""
        self.runtime: Runtime | None = None
        self.module: Any = None
        """The example's entry module, once served."""
        self._fetch: Callable[[Request, Any], Any] | None = None
        self._armed = False

    def note(self, event: str) -> None:
        """Add `event` to the trace, stamped with the virtual time."""
        self.trace.append(f"{self.clock.now_ms()} {event}")

    async def serve(
        self, example: str, data: Path, replace: dict[str, Any] | None = None
    ) -> Runtime:
        """Start the example on `data`, its object classes wrapped, bindings in `replace`
        put in place of the project's own."""
        worker = load_worker(str(EXAMPLES / example))
        self.module = sys.modules[worker.name]
        bindings = {
            name: self._chaotic(value) if _is_object_class(value) else value
            for name, value in {**worker.bindings, **(replace or {})}.items()
        }
        self._fetch = worker.fetch
        self.runtime = Runtime(path=str(data), bindings=bindings, clock=self.clock)
        await self.runtime.start()
        self._armed = True
        return self.runtime

    async def close(self) -> None:
        self._armed = False
        try:
            if self.runtime is not None:
                await self.runtime.close()
        finally:
            random.setstate(self._global_state)

    async def request(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        """Serve one request; `(status, parsed JSON or text)`, or `(0, error)` when the
        Worker raised (a call it made failed): nothing was acknowledged."""
        assert self.runtime is not None and self._fetch is not None
        self.requests += 1
        text = None if body is None else json.dumps(body)
        request = Request(f"http://sim{path}", method=method, body=text, headers=headers)
        served = asyncio.ensure_future(self._fetch(request, self.runtime.env))
        await self.clock.run_until_idle()
        while not served.done():
            # The Worker waits on time (a retry's backoff, a timeout): let it pass.
            await self.clock.advance(IN_FLIGHT_STEP_MS)
        try:
            response = served.result()
        except Exception as error:
            self.note(f"{method} {path} -> {type(error).__name__}")
            return 0, error
        raw = await response.text()
        self.note(f"{method} {path} -> {response.status}")
        is_json = response.headers.get("content-type", "").startswith("application/json")
        return response.status, json.loads(raw) if is_json else raw

    async def advance(self, ms: int) -> None:
        self.note(f"advance {ms}")
        await self.clock.advance(ms)

    async def strike(self, stub: Any) -> None:
        """Evict or crash the object behind `stub` (between calls)."""
        assert self.runtime is not None
        self.struck.setdefault(stub.id.name, []).append(self.clock.now_ms())
        if self.rng.random() < 0.5:
            self.faults["evict"] += 1
            self.note(f"evict {stub.id.name}")
            await self.runtime.evict(stub)
        else:
            self.faults["crash"] += 1
            self.note(f"crash {stub.id.name}")
            await self.runtime.crash(stub)

    async def maybe_crash(self, target: Any, after: str) -> bool:
        """With the `crash_after_effect` chance, crash the object `target` (a stub or id)
        now, `after` an effect whose record it has not committed yet. Whether it did."""
        if not self._armed or self.runtime is None:
            return False
        if self.rng.random() >= self.crash_after_effect:
            return False
        name = target.id.name if hasattr(target, "id") else target.name
        self.struck.setdefault(name, []).append(self.clock.now_ms())
        self.faults["crash after effect"] += 1
        self.note(f"crash {name} after {after}")
        await self.runtime.crash(target)
        return True

    def struck_since(self, name: str, since_ms: int) -> bool:
        """Whether object `name` was evicted or crashed at or after `since_ms`."""
        return any(at >= since_ms for at in self.struck.get(name, ()))

    def disarm(self) -> None:
        """No more crashes after effects (for a final check that must not be cut short)."""
        self._armed = False

    def _chaotic(self, cls: type[DurableObject]) -> type[DurableObject]:
        """A subclass of `cls` whose public coroutine methods and `alarm` may crash the
        object right after they return."""
        overrides: dict[str, Any] = {}
        for name, method in inspect.getmembers(cls, inspect.iscoroutinefunction):
            if name == "alarm" or not name.startswith("_"):
                overrides[name] = self._wrap(method, name)
        return type(cls.__name__, (cls,), overrides)

    def _wrap(self, method: Callable[..., Awaitable[Any]], name: str) -> Any:
        simulation = self

        @functools.wraps(method)
        async def wrapped(obj: Any, *args: Any, **kwargs: Any) -> Any:
            result = await method(obj, *args, **kwargs)
            await simulation.maybe_crash(obj.ctx.id, name)
            return result

        return wrapped

    def summary(self) -> str:
        faults = ", ".join(f"{count} {kind}" for kind, count in sorted(self.faults.items()))
        return f"seed {self.seed}: {self.requests} requests, faults: {faults or 'none'}"


def _is_object_class(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, DurableObject)
