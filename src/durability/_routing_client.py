"""`RoutingClient`: pick a shard for each push and learn from the load it reports.

The client is transport-free: `invoke(address, input)` does the actual call. Each
response's `load` is remembered per shard for one window (60 s), and the built-in
selector uses it: power of two choices among `shard-0 .. shard-{width-1}`, widening
when a chosen shard's backlog passes `soft_backlog_limit` and narrowing after a calm
window. Routing never retries and never reroutes: one push is one `invoke`.
"""

from __future__ import annotations

import inspect
import math
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from ._clock import now_ms
from ._errors import RoutingError
from ._load import EnqueueResult, LoadSnapshot
from ._types import MAX_SAFE_INTEGER
from ._validate import check_callable, check_int

MAX_OBSERVATIONS = 1024
"""Shards remembered at most; the least recently reported is forgotten first."""

_RESIZE_INTERVAL_MS = 1_000
_BAD_SHARD = "Sharding must return a non-empty shard key or { shard, location_hint }"


@dataclass(frozen=True, slots=True)
class RoutingAddress:
    """Where a push goes: the shard (object name) and an optional placement hint.

    A location hint only influences where a new object is first placed.
    """

    shard: str
    location_hint: str | None = None


RoutingTarget: TypeAlias = "str | RoutingAddress | Mapping[str, Any]"
"""Where a `sharding` function sends a push: a shard name, a `RoutingAddress`, or a
mapping with `shard` and optionally `location_hint`."""

Sharding: TypeAlias = (
    "Callable[[Any, Any, Mapping[str, LoadSnapshot]], RoutingTarget | Awaitable[RoutingTarget]]"
)
"""`sharding(input, context, observations)`: picks the shard of one push from its input,
the caller's transform context and the load each shard last reported (by shard name);
it may be async. Without one, the client's built-in selector picks."""

Invoke: TypeAlias = "Callable[[RoutingAddress, Any], Any]"
"""`invoke(address, input)`: does the one call of a push to the shard `address` names,
and returns its answer (an `EnqueueResult`-shaped mapping whose `load` is remembered)."""


class RoutingClient:
    """Route each `push` to one shard and call `invoke(address, input)` exactly once.

    `sharding(input, context, observations)` chooses the target (a `str`, a
    `RoutingAddress`, or a dict with `shard` and optional `location_hint`); without it
    the built-in load-aware selector does. `context` is the caller's: it reaches
    `sharding` only, and is never persisted or sent.
    """

    def __init__(
        self,
        *,
        invoke: Invoke,
        sharding: Sharding | None = None,
        soft_backlog_limit: int = 1000,
    ) -> None:
        check_callable("invoke", invoke)
        if sharding is not None:
            check_callable("sharding", sharding)
        check_int("soft_backlog_limit", soft_backlog_limit, "a positive safe integer")
        if not 1 <= soft_backlog_limit <= MAX_SAFE_INTEGER:
            raise ValueError("soft_backlog_limit must be a positive safe integer")
        self._invoke = invoke
        self._sharding = sharding
        self._limit = soft_backlog_limit
        self._observed: dict[str, LoadSnapshot] = {}
        self._width = 1
        self._last_resize = -math.inf

    def observations(self) -> dict[str, LoadSnapshot]:
        """The latest load seen per shard, within its window (a new mapping per call;
        snapshots are immutable, so nothing done to it changes routing)."""
        now = now_ms()
        for shard, snapshot in list(self._observed.items()):
            if now - snapshot.observed_at >= snapshot.window_ms:
                del self._observed[shard]
        return dict(self._observed)

    async def push(self, input: Any, context: Any = None) -> Any:
        """Choose a shard, `invoke` it once, learn its load; return the response as is.

        An invalid target raises `RoutingError` before anything is invoked. An exception
        from `invoke` propagates and nothing is learned; a `success=False` result is
        returned unchanged.
        """
        observed = self.observations()
        if self._sharding is None:
            target: object = self._select(observed)
        else:
            target = self._sharding(input, context, observed)
            if inspect.isawaitable(target):
                target = await target
        address = _address(target)
        response = self._invoke(address, input)
        if inspect.isawaitable(response):
            response = await response
        load = _load_of(response)
        if load is not None:
            self._record(address.shard, load)
        return response

    def _select(self, observed: Mapping[str, LoadSnapshot]) -> str:
        first = f"shard-{math.floor(random.random() * self._width)}"
        second = f"shard-{math.floor(random.random() * self._width)}"
        a, b = observed.get(first), observed.get(second)
        if a is None:
            return first
        if b is None:
            return second
        if a.outbound.pending_deliveries != b.outbound.pending_deliveries:
            return (
                first if a.outbound.pending_deliveries < b.outbound.pending_deliveries else second
            )
        return first if _pressure(a) <= _pressure(b) else second

    def _record(self, shard: str, load: LoadSnapshot) -> None:
        prior = self._observed.get(shard)
        if prior is None or load.observed_at >= prior.observed_at:
            self._observed.pop(shard, None)
            self._observed[shard] = load
            while len(self._observed) > MAX_OBSERVATIONS:
                del self._observed[next(iter(self._observed))]
        if self._sharding is None:
            self._resize(load)

    def _resize(self, load: LoadSnapshot) -> None:
        now = now_ms()
        if now - load.observed_at >= load.window_ms:
            return
        pending = load.outbound.pending_deliveries
        if pending > self._limit and now - self._last_resize >= _RESIZE_INTERVAL_MS:
            self._width += 1
            self._last_resize = now
        elif (
            self._width > 1
            and now - self._last_resize >= load.window_ms
            and pending < self._limit / 4
            and load.inbound.in_flight == 0
            and load.outbound.in_flight == 0
        ):
            self._width -= 1


def _pressure(load: LoadSnapshot) -> float:
    inbound, outbound = load.inbound, load.outbound
    return inbound.in_flight * (inbound.average_processing_ms or 0) + outbound.in_flight * (
        outbound.average_processing_ms or 0
    )


def _address(target: object) -> RoutingAddress:
    """The address a sharding result names; `RoutingError` if the shard is not usable."""
    if isinstance(target, str):
        shard: object = target
        hint: object = None
    elif isinstance(target, RoutingAddress):
        shard, hint = target.shard, target.location_hint
    elif isinstance(target, Mapping):
        shard = target.get("shard")
        hint = target.get("location_hint", target.get("locationHint"))
    else:
        raise RoutingError(_BAD_SHARD)
    if not isinstance(shard, str) or not shard:
        raise RoutingError(_BAD_SHARD)
    if hint is not None and (not isinstance(hint, str) or not hint):
        raise RoutingError("location_hint must be a non-empty string when given")
    return RoutingAddress(shard, hint)


def _load_of(response: object) -> LoadSnapshot | None:
    """The load a response reports: an `EnqueueResult`, or its JSON from a stub (None
    when there is no readable load: the shard is then simply not observed)."""
    if isinstance(response, EnqueueResult):
        return response.load
    if isinstance(response, Mapping) and "load" in response:
        try:
            return LoadSnapshot.from_json(response["load"])
        except TypeError:
            return None  # the push happened; advisory telemetry must not turn it into an error
    return None
