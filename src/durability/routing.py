"""Routing and load telemetry: what producers use to pick and weigh partitions.

Inside an object, `DurabilityRouting()` is the `RoutingLoad` its capabilities report
to (pass it as `routing=`). On the producer side, `DurabilityRouting.client(...)` picks
a shard per push, gets that object's stub from the namespace and calls the method
`invoke` names, exactly once. The client is a transform stub: `.with_(timeout, 5_000)`
and other caller transforms chain onto `push`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ._errors import RoutingError
from ._load import EnqueueResult, InboundLoad, LoadSnapshot, OutboundLoad, RoutingLoad
from ._routing_client import (
    MAX_OBSERVATIONS,
    Invoke,
    RoutingAddress,
    RoutingClient,
    RoutingTarget,
    Sharding,
)
from ._transforms import Transform, TransformStub
from ._transforms.define import settle
from ._validate import check_callable

__all__ = [
    "MAX_OBSERVATIONS",
    "DurabilityRouting",
    "EnqueueResult",
    "InboundLoad",
    "Invoke",
    "LoadSnapshot",
    "OutboundLoad",
    "RoutingAddress",
    "RoutingClient",
    "RoutingError",
    "RoutingLoad",
    "RoutingSession",
    "RoutingTarget",
    "Sharding",
]

StubInvoke = Callable[[Any, Any], Any]
"""`invoke(stub, input)`: call the application's method on the chosen object's stub."""


class RoutingSession:
    """A routing client bound to a Durable Object namespace (see `DurabilityRouting.client`).

    The namespace is resolved on every push, so it may come from an `env` that only
    exists once a request arrives.
    """

    __slots__ = ("_client", "_env", "_export_name", "_invoke", "_namespace")

    def __init__(
        self,
        *,
        invoke: StubInvoke,
        namespace: Callable[[], Any] | None,
        export_name: str | None,
        env: Any,
        sharding: Sharding | None,
        soft_backlog_limit: int,
    ) -> None:
        check_callable("invoke", invoke)
        if namespace is not None:
            check_callable("namespace", namespace)
        if export_name is not None and (not isinstance(export_name, str) or not export_name):
            raise TypeError("export_name must be a non-empty string")
        self._invoke = invoke
        self._namespace = namespace
        self._export_name = export_name
        self._env = env
        self._client = RoutingClient(
            invoke=self._call, sharding=sharding, soft_backlog_limit=soft_backlog_limit
        )

    async def push(self, input: Any, context: Any = None) -> Any:
        """Route `input` to one object and return what `invoke` returned (see
        `RoutingClient.push`)."""
        return await self._client.push(input, context)

    def with_(self, transform: Transform, options: Any = None) -> TransformStub[RoutingSession]:
        """A transform stub on this session with `transform` attached (chain more with
        `.with_`); e.g. `client.with_(timeout, 5_000).push(input)`."""
        return TransformStub(self).with_(transform, options)

    def observations(self) -> dict[str, LoadSnapshot]:
        """The load each shard reported within its window."""
        return self._client.observations()

    async def set_context(self, context: Mapping[str, Any], method: str, args: list[Any]) -> Any:
        """Receive a transformed `push`: transform context is merged over (and wins
        against) a positional context given as the second argument."""
        if method != "push":
            raise RoutingError(f'Unknown routing method "{method}"')
        values = list(args)
        positional = values[1] if len(values) > 1 else None
        if positional is not None and not isinstance(positional, Mapping):
            raise TypeError(
                "Routing context must be a mapping when combined with transform context"
            )
        merged = {**(positional or {}), **context}
        return await self.push(values[0] if values else None, merged)

    async def _call(self, address: RoutingAddress, input: Any) -> Any:
        namespace = self._resolve()
        get_by_name = getattr(namespace, "get_by_name", None)
        if callable(get_by_name):
            # The embedded runtime: one machine, so there is no placement to hint at.
            stub = get_by_name(address.shard)
        elif address.location_hint is None:
            stub = namespace.getByName(address.shard)
        else:
            stub = namespace.getByName(address.shard, {"locationHint": address.location_hint})
        return await settle(self._invoke(stub, input))

    def _resolve(self) -> Any:
        if self._namespace is not None:
            return self._namespace()
        name = self._export_name
        if name is None:
            raise RoutingError(
                "Use export_name (with env) or an explicit namespace to resolve the routing target"
            )
        env = self._env() if callable(self._env) else self._env
        value = _lookup(env, name)
        if not any(callable(getattr(value, m, None)) for m in ("get_by_name", "getByName")):
            raise RoutingError(f'Export "{name}" is not a Durable Object namespace')
        return value


def _lookup(env: Any, name: str) -> Any:
    if isinstance(env, Mapping):
        return env.get(name)
    return getattr(env, name, None)


class DurabilityRouting(RoutingLoad):
    """The load observer an object's capabilities share, and the producer-side client.

    `DurabilityRouting()` inside an object is a `RoutingLoad`: pass it as `routing=`.
    """

    @staticmethod
    def client(
        *,
        invoke: StubInvoke,
        namespace: Callable[[], Any] | None = None,
        export_name: str | None = None,
        env: Any = None,
        sharding: Sharding | None = None,
        soft_backlog_limit: int = 1000,
    ) -> RoutingSession:
        """A routing session on a namespace (`.with_(transform, options)` chains transforms).

        `namespace` is a zero-argument callable returning the namespace (checked on
        every push); otherwise `export_name` names the binding in `env` (an env object,
        a mapping, or a zero-argument callable returning one). `invoke(stub, input)`
        calls the application's method; `sharding` and `soft_backlog_limit` are as for
        `RoutingClient`.
        """
        return RoutingSession(
            invoke=invoke,
            namespace=namespace,
            export_name=export_name,
            env=env,
            sharding=sharding,
            soft_backlog_limit=soft_backlog_limit,
        )
