"""`Request` as `workers-runtime-sdk` has it: what a worker's `fetch(self, request)` gets.

The same constructor and defaults as on Cloudflare (`Request(url_or_request, method=,
headers=, body=, redirect=)`, a GET or HEAD without a body), and the same read-once body
methods and errors (see `_http_body` and `_http_headers`).
"""

from __future__ import annotations

from http import HTTPMethod
from typing import Any

from ._http_body import Body, body_content
from ._http_headers import HeaderLines, HTTPMessageMapping, header_lines, header_view
from ._http_url import normalize_url
from ._js_errors import js_error

__all__ = ["Request"]

_NORMALIZED_METHODS = {"DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT"}


def _valid_url(url: object) -> str:
    text = url if isinstance(url, str) else str(url)
    normal = normalize_url(text)
    if normal is None:
        raise js_error("TypeError", f"Invalid URL: {text}", TypeError)
    return normal


class Request(Body):
    """An HTTP request: `Request(url_or_request, method=, headers=, body=, redirect=)`.

    `method` is an `http.HTTPMethod`, `headers` an `HTTPMessage` (see `_http_headers`),
    `body` a stream; `await text()` / `json()` / `bytes()` / `form_data()` read it once.
    """

    _url: str
    _method: str

    def __init__(self, input: Request | str, **options: Any) -> None:
        source = input if isinstance(input, Request) else None
        self._url = source._url if source is not None else _valid_url(input)
        method = options.get("method", source._method if source is not None else "GET")
        method = method.value if isinstance(method, HTTPMethod) else str(method)
        self._method = method.upper() if method.upper() in _NORMALIZED_METHODS else method
        if "headers" in options and options["headers"] is not None:
            self._lines: HeaderLines = header_lines(options["headers"])
        else:
            self._lines = list(source._lines) if source is not None else []
        self._redirect = str(options.get("redirect", "follow"))
        self._cf = options.get("cf")
        if options.get("body") is not None:
            content, kind = body_content(options["body"], "Request")
        elif source is not None:
            content, kind = source._copy_content(), None
        else:
            content, kind = None, None
        if content is not None and self._method in ("GET", "HEAD"):
            raise js_error(
                "TypeError", "Request with a GET or HEAD method cannot have a body.", TypeError
            )
        self._init_body(content, kind)

    def _used_error(self) -> Exception:
        return OSError("Body already used")

    def __repr__(self) -> str:
        return f"Request(method={self._method!r}, url={self._url!r})"

    @property
    def url(self) -> str:
        return self._url

    @property
    def method(self) -> HTTPMethod:
        return HTTPMethod[self._method]

    @property
    def headers(self) -> HTTPMessageMapping:
        return header_view(self._lines)

    @property
    def cf(self) -> Any:
        """Cloudflare's request properties (`None` here: no Cloudflare edge in front)."""
        return self._cf

    @property
    def redirect(self) -> str:
        return self._redirect

    @property
    def cache(self) -> None:
        return None

    @property
    def integrity(self) -> str:
        return ""

    @property
    def keepalive(self) -> bool:
        return False

    @property
    def js_object(self) -> Request:
        return self

    @property
    def _js_request(self) -> Request:
        """The SDK's own name for `js_object`, which Cloudflare's examples use."""
        return self

    def clone(self) -> Request:
        """A copy with its own copy of the body (`OSError` once the body was read)."""
        return Request(self)
