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
from typing import TYPE_CHECKING

from ._http import FetchResponse, Request, Response, crossed
from ._ids import ObjectId
from ._js_errors import AbortError
from ._relaxed import call_relaxed
from ._websocket import WebSocket
from ._ws_events import SocketEvent

if TYPE_CHECKING:
    from ._instance import Instance
    from ._stub import ObjectNamespace

__all__ = ["fetch_object"]

EVICTED_CODE = 1001
"""The close code a standard WebSocket gets when its object is evicted anyway."""


async def fetch_object(
    namespace: ObjectNamespace, object_id: ObjectId, request: Request
) -> Response:
    """Deliver `request` to the object's `fetch`; its `Response` as the caller sees it."""
    if not namespace.has_method("fetch"):
        raise AbortError("Method fetch does not exist")
    key = (object_id.namespace, str(object_id))
    instance = namespace._runtime._live_instance(key, object_id)
    result = await instance.call(lambda target: call_relaxed(target.fetch, request))  # type: ignore[attr-defined]
    if not isinstance(result, FetchResponse):
        raise AbortError("Incorrect type for Promise: the Promise did not resolve to 'Response'.")
    if not isinstance(result, Response) or result.web_socket is None:
        return crossed(result, request.url)
    socket = result.web_socket
    if socket._peer is not None and socket._peer._taken_by == "accept":
        _hold_while_open(instance, socket._peer)
    return result


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
