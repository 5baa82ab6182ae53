"""`Request`, `Response` and `FetchResponse` as `workers-runtime-sdk` has them.

A worker's `fetch(self, request)` gets a `Request` and returns a `Response`, as on
Cloudflare, so the same handler runs under `durability serve`: the same constructors
and defaults (a str body is `text/plain;charset=UTF-8`, `Response.json(value)` is
`json.dumps(value)` as `application/json`, `Response.redirect(url, status)`), the same
read-once body methods and the same errors (see `_http_body` and `_http_headers`).
`Request` is defined in `_http_request`; this module gives it beside the responses.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any, Self, cast, overload

from ._http_body import Body, Content, body_content
from ._http_headers import HeaderLines, HTTPMessageMapping, header_lines, header_view
from ._http_request import Request as Request
from ._http_url import normalize_url
from ._js_errors import BodyUsedError, HttpStatusError, js_error
from ._websocket import WebSocket

__all__ = ["FetchResponse", "Request", "Response", "crossed"]

_NULL_BODY_STATUSES = {101, 204, 205, 304}
_REDIRECT_STATUSES = {301, 302, 303, 307, 308}


class _Json:
    """`Response.json(value, ...)` builds a JSON response (the class's `_json_response`,
    as the SDK allows); `await response.json()` parses a body."""

    @overload
    def __get__(self, instance: None, owner: type) -> Callable[..., Response]: ...

    @overload
    def __get__(self, instance: FetchResponse, owner: type) -> Callable[..., Awaitable[Any]]: ...

    def __get__(self, instance: FetchResponse | None, owner: type) -> Callable[..., Any]:
        if instance is None:
            build: Callable[..., Response] = cast("type[Response]", owner)._json_response
            return build

        async def parse(**kwargs: Any) -> Any:
            return json.loads(await instance.text(), **kwargs)

        return parse


class FetchResponse(Body):
    """A response as Python reads it: `status`, `status_text`, `ok`, `headers`, `url`,
    `redirected`, and the read-once body (`text()`, `json()`, `bytes()`, `buffer()`,
    `memoryview()`, `blob()`, `form_data()`)."""

    _status: int
    _status_text: str
    _url: str
    _redirected: bool

    def _set(
        self,
        status: int,
        status_text: str,
        lines: HeaderLines,
        content: Content,
        content_type: str | None = None,
        url: str = "",
        redirected: bool = False,
    ) -> None:
        self._status = status
        self._status_text = status_text
        self._lines = lines
        self._url = url
        self._redirected = redirected
        self._init_body(content, content_type)

    @classmethod
    def _made(
        cls,
        status: int,
        status_text: str,
        lines: HeaderLines,
        content: Content,
        url: str = "",
        redirected: bool = False,
    ) -> Self:
        made = cls.__new__(cls)
        made._set(status, status_text, lines, content, None, url, redirected)
        return made

    def _used_error(self) -> Exception:
        return BodyUsedError()

    @property
    def status(self) -> int:
        return self._status

    @property
    def status_text(self) -> str:
        return self._status_text

    @property
    def ok(self) -> bool:
        return 200 <= self._status <= 299

    @property
    def headers(self) -> HTTPMessageMapping:
        return header_view(self._lines)

    @property
    def url(self) -> str:
        return self._url

    @property
    def redirected(self) -> bool:
        return self._redirected

    @property
    def type(self) -> str:
        return "default"

    @property
    def js_object(self) -> FetchResponse:
        return self

    @property
    def js_response(self) -> FetchResponse:
        return self

    async def content(self) -> bytes:
        """The whole body, for sending (it counts as read)."""
        return await self._take()

    def raise_for_status(self) -> None:
        """`pyodide.http.HttpStatusError` for a 4xx or 5xx status."""
        if 400 <= self._status < 600:
            raise HttpStatusError(self._status, self._status_text, self._url)

    def clone(self) -> FetchResponse:
        """A copy with its own copy of the body (`BodyUsedError` once it was read)."""
        return FetchResponse._made(
            self._status,
            self._status_text,
            list(self._lines),
            self._copy_content(),
            self._url,
            self._redirected,
        )

    async def string(self) -> str:
        return await self.text()

    async def memoryview(self) -> memoryview:
        return memoryview(await self._take())

    async def formData(self) -> Any:
        return await self.form_data()

    def replace_body(self, body: Any) -> Response:
        """A response with this one's status and headers and `body`."""
        return Response(body, self._status, self._status_text, [*self._lines])

    def abort(self, reason: Any = None) -> None:
        raise ValueError("abort_controller is not set")

    json = _Json()  # type: ignore[assignment]


class Response(FetchResponse):
    """`Response(body=None, status=None, status_text="", headers=None)`, as the SDK's.

    Pass `status` and `headers` by keyword: the third positional parameter is
    `status_text`, as on Cloudflare. `Response(None, status=101, web_socket=client)`
    accepts a WebSocket upgrade, handing the client end of a `WebSocketPair` to the
    caller.
    """

    web_socket: WebSocket | None = None
    """The client end of the WebSocket a 101 response accepted, if any."""

    def __init__(
        self,
        body: Any = None,
        status: HTTPStatus | int | str | None = 200,
        status_text: str = "",
        headers: Any = None,
        web_socket: WebSocket | None = None,
    ) -> None:
        if web_socket is not None or status == 101:
            _check_upgrade(body, status, web_socket)
            self.web_socket = web_socket
            lines = header_lines(headers) if headers else []
            self._set(101, str(status_text or ""), lines, None, None)
            return
        if isinstance(body, FetchResponse):
            if status not in (None, 200) or status_text or headers is not None:
                raise ValueError(
                    "Expected no options when constructing Response from a js.Response"
                )
            content = body._copy_content()
            self._set(
                body._status,
                body._status_text,
                list(body._lines),
                content,
                None,
                body._url,
                body._redirected,
            )
            return
        content, kind = body_content(body, "Response")
        code = _status_code(status)
        if content is not None and code in _NULL_BODY_STATUSES:
            raise js_error(
                "TypeError",
                "Response with null body status (101, 204, 205, or 304) cannot have a body.",
                TypeError,
            )
        lines = header_lines(headers) if headers else []
        self._set(code, str(status_text or ""), lines, content, kind)

    def __repr__(self) -> str:
        parts = [f"status={self._status}"]
        if self._status_text:
            parts.append(f"status_text={self._status_text!r}")
        view = self.headers
        if "content-type" in view:
            parts.append(f"content_type={view['content-type']!r}")
        if self._url:
            parts.append(f"url={self._url!r}")
        return f"Response({', '.join(parts)})"

    @staticmethod
    def from_json(
        data: Any,
        status: HTTPStatus | int = HTTPStatus.OK,
        status_text: str = "",
        headers: Any = None,
    ) -> Response:
        """A response whose body is `json.dumps(data)`, as `application/json` unless
        `headers` name another content type."""
        lines = header_lines(headers) if headers else []
        if not any(name.lower() == "content-type" for name, _ in lines):
            lines.append(("content-type", "application/json"))
        return Response(json.dumps(data).encode("utf-8"), status, status_text, lines)

    _json_response = from_json

    @staticmethod
    def redirect(url: str, status: HTTPStatus | int = HTTPStatus.FOUND) -> Response:
        """A redirect to `url` (absolute) with status 301, 302, 303, 307 or 308."""
        location = normalize_url(url) if isinstance(url, str) else None
        if location is None:
            raise TypeError(f"Unable to parse URL: {url}")
        code = status.value if isinstance(status, HTTPStatus) else status
        if code not in _REDIRECT_STATUSES:
            raise ValueError(
                f"{code} is not a redirect status code. It must be one of: 301, 302, 303, "
                "307, or 308."
            )
        return Response(None, code, headers=[("location", location)])


def _check_upgrade(body: object, status: object, web_socket: object) -> None:
    """Status 101 goes with a WebSocket and no body, as workerd requires."""
    if web_socket is None:
        raise js_error(
            "RangeError",
            "Responses may only be constructed with status codes in the range 200 to 599, "
            "inclusive.",
            ValueError,
        )
    if not isinstance(web_socket, WebSocket):
        raise TypeError(f"web_socket must be a WebSocket, got {type(web_socket).__name__}")
    if status != 101:
        raise js_error(
            "RangeError", "Responses with a WebSocket must have status code 101.", ValueError
        )
    if body is not None:
        raise js_error(
            "TypeError",
            "Response with null body status (101, 204, 205, or 304) cannot have a body.",
            TypeError,
        )


def _status_code(status: object) -> int:
    """The status a `status=` argument gives (none, 0 or "" means 200)."""
    if not status:
        return 200
    if isinstance(status, HTTPStatus):
        return int(status.value)
    try:
        code = int(status) if isinstance(status, str | int | float) else -1
    except ValueError:
        code = -1
    if not 200 <= code <= 599:
        raise js_error(
            "RangeError",
            "Responses may only be constructed with status codes in the range 200 to 599, "
            "inclusive.",
            ValueError,
        )
    return code


def crossed(response: FetchResponse, url: str) -> Response:
    """`response` as the caller of `stub.fetch(...)` gets it: a new `Response` with the
    request's URL and the status's standard text."""
    text = response.status_text
    if not text:
        try:
            text = HTTPStatus(response.status).phrase
        except ValueError:
            text = ""
    return Response._made(
        response.status, text, list(response.header_lines), response._copy_content(), url
    )
