"""The embedded Durable Object runtime: objects on this machine, in memory or on disk."""

from __future__ import annotations

from ._errors import ObjectEvictedError, PathInUseError
from ._host import Runtime
from ._http import Request, Response
from ._ids import ObjectId
from ._object import AlarmInvocationInfo, DurableObject, ObjectContext
from ._storage import ObjectStorage
from ._stub import Env, ObjectNamespace, ObjectStub

__all__ = [
    "AlarmInvocationInfo",
    "DurableObject",
    "Env",
    "ObjectContext",
    "ObjectEvictedError",
    "ObjectId",
    "ObjectNamespace",
    "ObjectStorage",
    "ObjectStub",
    "PathInUseError",
    "Request",
    "Response",
    "Runtime",
]
