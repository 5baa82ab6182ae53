"""`stub.fetch(request)`: HTTP to a Durable Object's own `fetch`, WebSocket upgrades
included.

The request reaches the object as a call (input gate, order) and its `Response` comes
back as is, not copied: a `101` response carries the client end of a WebSocket the
object kept the other end of. An object that took its end with `accept()` (the
standard API, not hibernatable) stays live while that socket is open, as on Cloudflare;
evicting it anyway closes the socket with 1001 (going away).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ._http import Request, Response
from ._ids import ObjectId
from ._websocket import WebSocket
from ._ws_events import SocketEvent

if TYPE_CHECKING:
    from ._host import Runtime
    from ._instance import Instance
    from ._object import DurableObject

__all__ = ["fetch_object"]

EVICTED_CODE = 1001
"""The close code a standard WebSocket gets when its object is evicted anyway."""


async def fetch_object(runtime: Runtime, object_id: ObjectId, request: Any) -> Response:
    """Deliver `request` (a `Request` or a URL) to the object's `fetch`; its `Response`."""
    if isinstance(request, str):
        request = Request(request)
    if not isinstance(request, Request):
        raise TypeError(f"stub.fetch takes a Request or a URL, got {type(request).__name__}")
    cls = runtime.namespace(object_id.namespace).object_class
    if not callable(getattr(cls, "fetch", None)):
        raise TypeError(f"{cls.__name__} has no fetch(request) method to send the request to")
    key = (object_id.namespace, str(object_id))
    instance = runtime._live.get(key) or runtime._instance(object_id)

    def invoke(target: DurableObject) -> object:
        return target.fetch(request)  # type: ignore[attr-defined]

    response = await instance.call(invoke)
    if not isinstance(response, Response):
        raise TypeError(
            f"{cls.__name__}.fetch must return a Response, got {type(response).__name__}"
        )
    socket = response.web_socket
    if socket is not None and socket._peer is not None and socket._peer._taken_by == "accept":
        _hold_while_open(instance, socket._peer)
    return response


def _hold_while_open(instance: Instance, end: WebSocket) -> None:
    """Keep `instance` busy (not idle-evicted) until `end` is closed."""
    if end.readyState == WebSocket.CLOSED:
        return
    held: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def closed(event: SocketEvent) -> None:
        if not held.done():
            held.set_result(None)

    def released(future: asyncio.Future[None]) -> None:
        if future.cancelled():
            end.close(EVICTED_CODE, "Durable Object evicted")

    end.addEventListener("close", closed)
    held.add_done_callback(released)
    instance.keep(held)
