"""The embedded Durable Object runtime: objects on this machine, in memory or on disk.

Importing it also lets a Cloudflare Python Worker's imports (`from workers import
DurableObject, Response`, `import js`, `from pyodide.ffi import to_js`) resolve to this
runtime's stand-ins where the real modules are not installed (see `_stand_ins`).
"""

from __future__ import annotations

from ._errors import ObjectEvictedError, PathInUseError
from ._host import Runtime
from ._http import Request, Response
from ._ids import ObjectId
from ._object import AlarmInvocationInfo, DurableObject, ObjectContext
from ._platform import Platform
from ._stand_ins import install_stand_ins
from ._storage import ObjectStorage
from ._stub import Env, ObjectNamespace, ObjectStub
from ._websocket import WebSocket, WebSocketPair, WebSocketRequestResponsePair
from ._workers import WorkerEntrypoint

install_stand_ins()

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
    "Platform",
    "Request",
    "Response",
    "Runtime",
    "WebSocket",
    "WebSocketPair",
    "WebSocketRequestResponsePair",
    "WorkerEntrypoint",
]
