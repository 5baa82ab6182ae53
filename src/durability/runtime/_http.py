"""`Request` and `Response` for worker modules, mirroring the Workers Python API.

A worker's `async def fetch(request, env)` gets a `Request` and returns a `Response`,
as it would on Cloudflare, so the same handler runs under `durability serve`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .._serialization import check_json_value, to_json_text
from ._websocket import WebSocket
from ._ws_events import js_error

__all__ = ["Headers", "Request", "Response"]

HeadersInit = Mapping[str, str] | Iterable[tuple[str, str]]
"""Headers as a mapping or as (name, value) pairs; names are case-insensitive."""


class Headers(Mapping[str, str]):
    """Case-insensitive HTTP headers; repeated names are joined with ", "."""

    def __init__(self, init: HeadersInit | None = None) -> None:
        self._values: dict[str, str] = {}
        pairs = init.items() if isinstance(init, Mapping) else (init or ())
        for name, value in pairs:
            if not isinstance(name, str) or not isinstance(value, str):
                raise TypeError("headers must map str names to str values")
            key = name.lower()
            self._values[key] = f"{self._values[key]}, {value}" if key in self._values else value

    def __getitem__(self, name: str) -> str:
        return self._values[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Headers({self._values!r})"


class Request:
    """An incoming HTTP request: `method`, `url`, `headers`, `await text()`, `await json()`."""

    def __init__(
        self,
        url: str,
        *,
        method: str = "GET",
        headers: HeadersInit | None = None,
        body: bytes | str = b"",
    ) -> None:
        if not isinstance(url, str):
            raise TypeError("url must be a str")
        if not isinstance(method, str) or not method:
            raise TypeError("method must be a non-empty str")
        if not isinstance(body, bytes | str):
            raise TypeError("body must be bytes or str")
        self.url = url
        self.method = method.upper()
        self.headers = Headers(headers)
        self._body = body.encode() if isinstance(body, str) else body

    def __repr__(self) -> str:
        return f"Request({self.method} {self.url})"

    async def body(self) -> bytes:
        """The raw body bytes."""
        return self._body

    async def text(self) -> str:
        """The body decoded as UTF-8."""
        return self._body.decode("utf-8")

    async def json(self) -> Any:
        """The body parsed as JSON (`json.JSONDecodeError`, a `ValueError`, if it is not)."""
        return json.loads(self._body)


class Response:
    """An HTTP response: `Response(body, status=200, headers=None)` or `Response.json(value)`.

    A `str` body is sent as UTF-8 `text/plain` unless a content-type header says otherwise.
    `Response(None, status=101, web_socket=client)` accepts a WebSocket upgrade, handing
    the client end of a `WebSocketPair` to the caller.
    """

    def __init__(
        self,
        body: str | bytes | None = None,
        status: int = 200,
        headers: HeadersInit | None = None,
        web_socket: WebSocket | None = None,
    ) -> None:
        if isinstance(status, bool) or not isinstance(status, int):
            raise TypeError("status must be an integer")
        if not 100 <= status <= 599:
            raise ValueError("status must be an HTTP status code (100-599)")
        if body is not None and not isinstance(body, str | bytes):
            raise TypeError("body must be str, bytes or None")
        _check_upgrade(body, status, web_socket)
        self.status = status
        self.web_socket = web_socket
        self.headers = Headers(headers)
        if isinstance(body, str):
            self.body = body.encode("utf-8")
            if "content-type" not in self.headers:
                self.headers = Headers([*self.headers.items(), ("content-type", _TEXT)])
        else:
            self.body = body or b""

    @classmethod
    def json(cls, value: Any, status: int = 200, headers: HeadersInit | None = None) -> Response:
        """A response whose body is `value` as JSON (a JSON value, else `TypeError`).

        The content type is `application/json` unless `headers` set one.
        """
        text = to_json_text(check_json_value(value))
        merged = Headers(headers)
        if "content-type" not in merged:
            merged = Headers([*merged.items(), ("content-type", "application/json")])
        return cls(text.encode("utf-8"), status, merged)

    def __repr__(self) -> str:
        return f"Response(status={self.status}, {len(self.body)} bytes)"

    async def text(self) -> str:
        """The body decoded as UTF-8."""
        return self.body.decode("utf-8")


_TEXT = "text/plain;charset=UTF-8"


def _check_upgrade(body: object, status: int, web_socket: object) -> None:
    """Status 101 goes with a WebSocket and no body, as workerd requires."""
    if web_socket is not None:
        if not isinstance(web_socket, WebSocket):
            raise TypeError(f"web_socket must be a WebSocket, got {type(web_socket).__name__}")
        if status != 101:
            raise js_error("RangeError", "Responses with a WebSocket must have status code 101.")
    elif status == 101:
        raise js_error(
            "RangeError",
            "Responses may only be constructed with status codes in the range 200 to 599, "
            "inclusive.",
        )
    if status == 101 and body is not None:
        raise js_error(
            "TypeError",
            "Response with null body status (101, 204, 205, or 304) cannot have a body.",
        )
