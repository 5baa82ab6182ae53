"""The new code, as `durability check` sees it: the worker loaded as `serve` loads it, and
one object of each bound class built (on an in-memory runtime, never on the data) to
learn what each capability declares."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..._virtual_clock import VirtualClock
from ...runtime import Runtime
from ...runtime._ids import id_from_name
from ...runtime.server import WorkerModule, load_worker
from .capabilities import CAPABILITIES, Capability

PROBE_NAME = "durability-check-probe"
"""The name of the object built of each class (in memory, thrown away)."""


@dataclass
class Declared:
    """What the new code declares per namespace: by capability, its handlers (`None`: the
    capability is not used); `failure` when an object of the class could not be built."""

    capabilities: dict[int, Mapping[str, Any] | None] = field(default_factory=dict)
    failure: str | None = None

    def of(self, capability: Capability) -> Mapping[str, Any] | None:
        return self.capabilities.get(id(capability))


def load(worker: str) -> WorkerModule:
    """The worker, loaded as `durability serve` loads it (`WorkerModuleError` if not)."""
    return load_worker(worker)


def declared(module: WorkerModule) -> dict[str, Declared]:
    """For each namespace the worker binds, what its class declares."""
    return asyncio.run(_probe(module.bindings))


async def _probe(bindings: Mapping[str, Any]) -> dict[str, Declared]:
    found: dict[str, Declared] = {}
    async with Runtime(bindings=bindings, clock=VirtualClock(), idle_evict_ms=None) as runtime:
        for namespace in runtime._namespaces:
            entry = found[namespace] = Declared()
            object_id = id_from_name(namespace, PROBE_NAME)
            try:
                obj = runtime._instance(object_id).user_object()
            except Exception as error:
                entry.failure = f"{type(error).__name__}: {error}"
                continue
            for capability in CAPABILITIES:
                entry.capabilities[id(capability)] = capability.declared(obj)
    return found
