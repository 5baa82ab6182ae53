"""The Hibernation API methods of a Durable Object's `ctx`, in Cloudflare's spelling.

`ObjectContext` inherits them; they reach the runtime's `SocketHub` (see
`_hibernation`) through the instance, so what they set outlives the instance.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ._errors import ObjectEvictedError
from ._hibernation import MAX_TAG_LENGTH, MAX_TAGS, ObjectSockets, SocketHub
from ._js_containers import JsArray
from ._js_values import js_string
from ._websocket import WebSocket, WebSocketRequestResponsePair
from ._ws_events import js_error

if TYPE_CHECKING:
    from ._instance import Instance

__all__ = ["WebSocketMethods"]


class WebSocketMethods:
    """`acceptWebSocket`, `getWebSockets`, `getTags` and the auto-response methods."""

    __slots__ = ()
    _instance: Instance

    def _sockets(self) -> ObjectSockets:
        """The object's sockets, made on first use."""
        return self._hub().of(self._instance.id)

    def _found(self) -> ObjectSockets | None:
        """The object's sockets, if it has any state in the hub (nothing is made)."""
        instance = self._instance
        return self._hub().peek((instance.id.namespace, str(instance.id)))

    def _hub(self) -> SocketHub:
        instance = self._instance
        if instance.gone:
            raise ObjectEvictedError(
                f"object {instance.id.namespace}:{instance.id} was evicted: its ctx no "
                "longer accepts or lists WebSockets"
            )
        return instance.host.sockets

    def acceptWebSocket(self, ws: WebSocket, tags: Iterable[str] | None = None) -> None:
        """Accept `ws` for the Hibernation API: its events go to the object's
        `webSocketMessage` / `webSocketClose` / `webSocketError`, whichever instance is
        live. `tags` (at most 10 strings of at most 256 characters) select it in
        `getWebSockets(tag)`; for a WebSocket of `js.WebSocketPair` they must be a
        JavaScript array (`to_js([...])`), as on Cloudflare, whose items read as strings."""
        if not isinstance(ws, WebSocket):
            raise js_error(
                "TypeError",
                "Failed to execute 'acceptWebSocket' on 'DurableObjectState': parameter 1 "
                "is not of type 'WebSocket'.",
            )
        if ws._cloudflare_values and tags is not None:
            if not isinstance(tags, JsArray):
                raise js_error(
                    "TypeError",
                    "Failed to execute 'acceptWebSocket' on 'DurableObjectState': parameter 2 "
                    "is not of type 'Array'.",
                )
            tags = [js_string(tag) for tag in tags]
        self._sockets().accept(ws, _check_tags(tags))

    def getWebSockets(self, tag: str | None = None) -> list[WebSocket]:
        """The object's hibernatable WebSockets not yet closed, or those tagged `tag`."""
        if tag is not None and not isinstance(tag, str):
            raise TypeError(f"tag must be a str, got {type(tag).__name__}")
        found = self._found()
        return [] if found is None else found.sockets(tag)

    def getTags(self, ws: WebSocket) -> list[str]:
        """The tags `ws` was accepted with."""
        found = self._found()
        if not isinstance(ws, WebSocket) or found is None or not found.holds(ws):
            raise js_error(
                "Error",
                "you must call 'acceptWebSocket()' before attempting to access the tags of "
                "a WebSocket.",
            )
        return list(ws._tags)

    def setWebSocketAutoResponse(self, pair: WebSocketRequestResponsePair | None = None) -> None:
        """Answer a message equal to `pair.request` with `pair.response` on every
        hibernatable socket of the object, without waking it; `None` stops it."""
        if pair is not None and not isinstance(pair, WebSocketRequestResponsePair):
            raise TypeError(
                f"expected a WebSocketRequestResponsePair or None, got {type(pair).__name__}"
            )
        sockets = self._sockets()
        sockets.auto_response = pair
        self._hub().release((self._instance.id.namespace, str(self._instance.id)), sockets)

    def getWebSocketAutoResponse(self) -> WebSocketRequestResponsePair | None:
        """The pair set by `setWebSocketAutoResponse`, or `None`."""
        found = self._found()
        return None if found is None else found.auto_response

    def getWebSocketAutoResponseTimestamp(self, ws: WebSocket) -> datetime | None:
        """When the auto-response last answered on `ws` (aware UTC), or `None`."""
        if not isinstance(ws, WebSocket):
            raise TypeError(f"expected a WebSocket, got {type(ws).__name__}")
        if ws._auto_response_ms is None:
            return None
        return datetime.fromtimestamp(ws._auto_response_ms / 1000, UTC)


def _check_tags(tags: Iterable[str] | None) -> tuple[str, ...]:
    if tags is None:
        return ()
    if isinstance(tags, str) or not isinstance(tags, Iterable):
        raise TypeError(f"tags must be a list of str, got {type(tags).__name__}")
    chosen = tuple(tags)
    for tag in chosen:
        if not isinstance(tag, str):
            raise TypeError(f"tags must be str, got {type(tag).__name__}")
        if len(tag) > MAX_TAG_LENGTH:
            raise js_error(
                "Error",
                f'"{tag}" is longer than the max tag length ({MAX_TAG_LENGTH} characters).',
            )
    if len(chosen) > MAX_TAGS:
        raise js_error("Error", f"a Hibernatable WebSocket cannot have more than {MAX_TAGS} tags")
    return chosen
