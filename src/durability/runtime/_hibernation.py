"""The Hibernation API's sockets: held by the runtime, delivered to whichever instance
of the object is live.

`ctx.acceptWebSocket(ws, tags)` hands the object's end of a WebSocket to the runtime
(`SocketHub`), not to the instance: its messages, close and error become calls of the
object's `webSocketMessage(ws, message)`, `webSocketClose(ws, code, reason, wasClean)`
and `webSocketError(ws, error)`, delivered as any call (input gate, order, a new
instance built when none is live). So the sockets, their tags and attachments outlive
the instance: an evicted object (idle, as Cloudflare hibernates one, or `rt.evict`)
keeps its connections, and the next message wakes a new instance. A crash (or a failed
commit) resets the object: its sockets are closed with 1011.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._clock import now_ms
from ._catalog_file import Key
from ._errors import ObjectEvictedError
from ._ids import ObjectId
from ._relaxed import call_relaxed
from ._websocket import WebSocket, WebSocketRequestResponsePair
from ._ws_events import (
    ABNORMAL_CLOSE,
    ABNORMAL_REASON,
    CloseEvent,
    ErrorEvent,
    MessageEvent,
    SocketEvent,
    js_error,
)

if TYPE_CHECKING:
    from ._host import Runtime
    from ._object import DurableObject

logger = logging.getLogger("durability.runtime")

MAX_TAGS = 10
"""The most tags one socket may carry (workerd's limit)."""

MAX_TAG_LENGTH = 256
"""The longest tag, in characters (workerd's limit)."""

RESET_CODE = 1011
"""The close code the clients of a crashed (reset) object receive."""

UNCLOSED_DROP_S = 10.0
"""How long a connection lasts after `webSocketClose` returned without closing the
socket (measured on workerd), before it is dropped without a close frame."""


class ObjectSockets:
    """One object's hibernatable sockets, in the order they were accepted, and its
    auto-response."""

    def __init__(self, hub: SocketHub, key: Key, object_id: ObjectId) -> None:
        self._hub = hub
        self._key = key
        self._id = object_id
        self._sockets: dict[WebSocket, None] = {}
        self.auto_response: WebSocketRequestResponsePair | None = None

    @property
    def unused(self) -> bool:
        """No socket and no auto-response: nothing to keep for the object."""
        return not self._sockets and self.auto_response is None

    def accept(self, ws: WebSocket, tags: tuple[str, ...]) -> None:
        """Take `ws`: from now on its events are delivered to the object's handlers."""
        if ws._taken_by is not None:
            raise js_error(
                "Error",
                "Cannot call `acceptWebSocket()` if the WebSocket was already accepted via "
                "`accept()`",
            )
        ws._tags = tags
        self._sockets[ws] = None
        ws._take("hibernation", lambda event: self._deliver(ws, event))

    def sockets(self, tag: str | None = None) -> list[WebSocket]:
        """The accepted sockets not yet closed (with `tag` among their tags, if given)."""
        if tag is None:
            return list(self._sockets)
        return [ws for ws in self._sockets if tag in ws._tags]

    def holds(self, ws: WebSocket) -> bool:
        """Whether `ws` is one of this object's hibernatable sockets."""
        return ws in self._sockets

    def reset(self) -> None:
        """The object crashed: close every socket with 1011 and forget them."""
        sockets, self._sockets = list(self._sockets), {}
        for ws in sockets:
            ws.close(RESET_CODE, "Durable Object reset")

    def _deliver(self, ws: WebSocket, event: SocketEvent) -> None:
        if isinstance(event, MessageEvent):
            pair = self.auto_response
            if pair is not None and isinstance(event.data, str) and event.data == pair.request:
                if not ws._close_sent:
                    ws.send(pair.response)
                ws._auto_response_ms = now_ms()
                return
            self._call(ws, "webSocketMessage", (ws, event.data), None)
        elif isinstance(event, CloseEvent):
            args = (ws, event.code, event.reason, event.wasClean)
            self._call(ws, "webSocketClose", args, lambda: self._forget(ws))
        elif isinstance(event, ErrorEvent):
            self._call(ws, "webSocketError", (ws, event.error), None)

    def _call(
        self,
        ws: WebSocket,
        handler: str,
        args: tuple[object, ...],
        done: Callable[[], None] | None,
    ) -> None:
        """Deliver `handler(*args)` to the object as a call; run `done()` once it ended."""
        if ws not in self._sockets:
            if done is not None:
                done()
            return
        future = self._hub.call(self._key, self._id, handler, args, done)
        if future is None:
            if done is not None:
                done()
            return

        def ended(outcome: asyncio.Future[object]) -> None:
            if not outcome.cancelled():
                error = outcome.exception()
                if isinstance(error, ObjectEvictedError):
                    logger.warning("%s was cut short: %s", handler, error)
                elif error is not None:
                    logger.error("%s raised", handler, exc_info=error)
            if done is not None:
                done()  # again if the handler never started (it is idempotent)

        future.add_done_callback(ended)

    def _forget(self, ws: WebSocket) -> None:
        """`webSocketClose` ran: the socket is no longer the object's. If the handler left
        it open, the connection is dropped without a close frame `UNCLOSED_DROP_S` later,
        as workerd does."""
        self._sockets.pop(ws, None)
        self._hub.release(self._key, self)
        if ws._close_sent:
            return
        event = CloseEvent(ABNORMAL_CLOSE, ABNORMAL_REASON, False)
        try:
            asyncio.get_running_loop().call_later(UNCLOSED_DROP_S, ws._close_with, event)
        except RuntimeError:
            ws._close_with(event)


class SocketHub:
    """Every object's hibernatable sockets, by object key; owned by a `Runtime`."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._objects: dict[Key, ObjectSockets] = {}
        self._warned: set[tuple[type, str]] = set()

    def of(self, object_id: ObjectId) -> ObjectSockets:
        """The sockets of the object with `object_id` (made on first use)."""
        key = (object_id.namespace, str(object_id))
        sockets = self._objects.get(key)
        if sockets is None:
            sockets = self._objects[key] = ObjectSockets(self, key, object_id)
        return sockets

    def peek(self, key: Key) -> ObjectSockets | None:
        """The sockets of the object with `key`, if it has any state here."""
        return self._objects.get(key)

    def release(self, key: Key, sockets: ObjectSockets) -> None:
        """Drop the object's entry once it holds nothing."""
        if sockets.unused and self._objects.get(key) is sockets:
            del self._objects[key]

    def reset(self, key: Key) -> None:
        """The object crashed: its sockets are closed with 1011 (see `ObjectSockets`)."""
        sockets = self._objects.pop(key, None)
        if sockets is not None:
            sockets.reset()

    def close_all(self) -> None:
        """The runtime closes: every socket is closed with 1001 (going away)."""
        objects, self._objects = list(self._objects.values()), {}
        for sockets in objects:
            for ws in sockets.sockets():
                ws.close(1001, "")

    def call(
        self,
        key: Key,
        object_id: ObjectId,
        handler: str,
        args: tuple[object, ...],
        done: Callable[[], None] | None = None,
    ) -> asyncio.Future[object] | None:
        """Deliver `handler(*args)` to the object, or `None` when it cannot be delivered
        (the runtime is not running, or the class lacks that handler).

        `done()` runs as soon as the handler has run (before the call's outcome waits
        for its writes to be durable), as workerd forgets a closed socket then.
        """
        instance = self._runtime.instance_for_alarm(key, object_id.name)
        if instance is None:
            return None
        cls = self._runtime.namespace(key[0]).object_class
        if not callable(getattr(cls, handler, None)):
            if (cls, handler) not in self._warned:
                self._warned.add((cls, handler))
                logger.warning(
                    "%s has no %s method: the WebSocket events it would get are dropped",
                    cls.__name__,
                    handler,
                )
            return None

        async def run(target: DurableObject) -> object:
            try:
                result = call_relaxed(getattr(target, handler), *args)
                return await result if inspect.isawaitable(result) else result
            finally:
                if done is not None:
                    done()

        return instance.call(run)
