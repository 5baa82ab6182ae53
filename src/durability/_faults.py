"""The fault point a capability reaches without knowing the runtime: a log's cold-store
calls.

The runtime's `Faults` (runtime/_faults.py) are asked at its own points directly; the
cold-store point belongs to the log, which knows nothing of the runtime. An instance
running with faults names its `FaultSite` in a context variable, which its calls' tasks
(and every task they start) inherit, and `cold_store_fault` asks it.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Literal, Protocol

__all__ = ["ColdAction", "ColdStoreFaults", "FaultSite", "cold_store_fault"]

ColdAction = Literal["read", "write", "written"]
"""Where a cold-store call stands: before a read, before a write, after a write returned."""


class ColdStoreFaults(Protocol):
    """What a `FaultSite` asks: `Faults.cold_store`."""

    def cold_store(self, object_id: Any, action: ColdAction) -> None: ...


class FaultSite:
    """The faults of a runtime, bound to one of its objects (see `cold_store_fault`)."""

    __slots__ = ("faults", "object_id")

    def __init__(self, faults: ColdStoreFaults, object_id: object) -> None:
        self.faults = faults
        self.object_id = object_id


fault_site: ContextVar[FaultSite | None] = ContextVar("durability_fault_site", default=None)
"""The site of the object whose call runs in this context, when its runtime has faults."""


def cold_store_fault(action: ColdAction) -> None:
    """Ask the running object's faults about a cold-store call (nothing without faults)."""
    site = fault_site.get()
    if site is not None:
        site.faults.cold_store(site.object_id, action)
