"""The events a WebSocket end receives, and the errors its methods raise.

Names and fields follow the Workers WebSocket API (`MessageEvent.data`,
`CloseEvent.code`/`reason`/`wasClean`, `ErrorEvent.error`/`message`), so listeners
written for Cloudflare read them unchanged. Errors are workerd's, word for word, and of
its type: pyodide's `JsException`, that is also the Python exception closest to the
JavaScript one (`js_error`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ._js_errors import js_error as _js_error

if TYPE_CHECKING:
    from ._blob import JsBlob

__all__ = [
    "BinaryMessage",
    "CloseEvent",
    "ErrorEvent",
    "MessageEvent",
    "SocketEvent",
    "js_error",
]

ABNORMAL_CLOSE = 1006
"""The code a close event carries when the peer went away without a close frame."""

ABNORMAL_REASON = "WebSocket disconnected without sending Close frame."
"""workerd's reason for that close event."""

NO_STATUS = 1005
"""The code a close event carries when the close frame named no code."""


class BinaryMessage(bytes):
    """A binary WebSocket message: `bytes`, with the methods of the JavaScript
    `ArrayBuffer` proxy Cloudflare hands Python code (`to_bytes()`, `to_py()`,
    `byteLength`), so code written for either host reads it."""

    def to_bytes(self) -> bytes:
        """The message as plain `bytes`."""
        return bytes(self)

    def to_py(self) -> bytes:
        """The message as plain `bytes` (what `ArrayBuffer.to_py()` gives too)."""
        return bytes(self)

    @property
    def byteLength(self) -> int:
        """The message's length in bytes."""
        return len(self)


@dataclass(frozen=True)
class MessageEvent:
    """A message arrived: `data` is a `str` (text frame), a `BinaryMessage`, or a
    `JsBlob` (binary, where the end's `binaryType` is `"blob"`)."""

    data: str | BinaryMessage | JsBlob
    type: str = field(default="message", init=False)


@dataclass(frozen=True)
class CloseEvent:
    """The peer closed: its `code`, `reason`, and whether the close handshake happened."""

    code: int
    reason: str
    wasClean: bool
    type: str = field(default="close", init=False)


@dataclass(frozen=True)
class ErrorEvent:
    """The connection failed: `error` is the exception, `message` its text."""

    error: BaseException
    type: str = field(default="error", init=False)

    @property
    def message(self) -> str:
        """The error's text."""
        return str(self.error)


SocketEvent = MessageEvent | CloseEvent | ErrorEvent
"""What one end of a WebSocket receives."""

_PYTHON_TYPES: dict[str, type[Exception]] = {
    "TypeError": TypeError,
    "RangeError": ValueError,
    "InvalidAccessError": ValueError,
    "DataCloneError": TypeError,
}


def js_error(name: str, message: str) -> Exception:
    """The exception for workerd's JavaScript error `name` with `message`: a `JsException`
    whose text is `name: message`, as on Cloudflare, that is also the closest Python
    class (`TypeError` stays a `TypeError`; `RangeError` and `InvalidAccessError`, a bad
    value, are a `ValueError`; a plain `Error` is a `RuntimeError`)."""
    return _js_error(name, message, _PYTHON_TYPES.get(name, RuntimeError))
