"""The embedded Durable Object runtime: objects on this machine, in memory or on disk.

Importing it also lets `from workers import DurableObject, WorkerEntrypoint, Request,
Response` resolve to this runtime's classes where Cloudflare's `workers` SDK is not
installed (see `_workers`), and `from js import WebSocketPair` and
`from pyodide.ffi import to_js` where those modules are absent (see `_js_standins`).
"""

from __future__ import annotations

from ._errors import ObjectEvictedError, PathInUseError
from ._host import Runtime
from ._http import Request, Response
from ._ids import ObjectId
from ._js_standins import install_js_fallback
from ._object import AlarmInvocationInfo, DurableObject, ObjectContext
from ._platform import Platform
from ._storage import ObjectStorage
from ._stub import Env, ObjectNamespace, ObjectStub
from ._websocket import WebSocket, WebSocketPair, WebSocketRequestResponsePair
from ._workers import WorkerEntrypoint, install_workers_fallback

install_workers_fallback()
install_js_fallback()

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
