"""`fetch()`: real outbound HTTP for the `workers` stand-in, on asyncio streams.

HTTP/1.1 over `asyncio.open_connection` (TLS for `https`), one connection per request,
standard library only: the request is sent with `Content-Length` (its body read whole
first), the response read whole (`Content-Length`, chunked, or until the connection
closes) and decoded from gzip or deflate, and redirects followed as `fetch` does
(`redirect="follow"`, at most 20; `"manual"` returns the 3xx, `"error"` raises).
Host names are resolved by asyncio's resolver, which runs `getaddrinfo` in the loop's
default executor (a thread), the one place a thread is used.
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from typing import Any
from urllib.parse import urljoin, urlsplit

from ._http import FetchResponse, Request, Response
from ._http_headers import HeaderLines
from ._js_errors import AbortError

MAX_REDIRECTS = 20
_HTTP_SCHEMES = {"http": 80, "https": 443}


async def fetch(resource: Request | str, **options: Any) -> Response:
    """Send `resource` (a URL or a `Request`, with `Request`'s options) and return the
    response; a failure to connect raises `pyodide.http.AbortError`."""
    request = Request(resource, **options)
    mode = request.redirect
    url, method, lines = request.url, request._method, request.header_lines
    body = await request.bytes() if request.body is not None else None
    for _ in range(MAX_REDIRECTS + 1):
        status, reason, headers, content = await _exchange(url, method, lines, body)
        location = next((v for k, v in headers if k.lower() == "location"), None)
        if status not in (301, 302, 303, 307, 308) or location is None or mode == "manual":
            response = FetchResponse._made(
                status, reason, headers, content, url, redirected=url != request.url
            )
            return Response(response)
        if mode == "error":
            raise AbortError(f"Fetch API cannot load: {url} (redirect mode is 'error')")
        url = urljoin(url, location)
        if status == 303 or (status in (301, 302) and method == "POST"):
            method, body = "GET", None
            lines = [(k, v) for k, v in lines if k.lower() not in ("content-type",)]
    raise AbortError(f"Fetch API cannot load: {request.url} (too many redirects)")


async def _exchange(
    url: str, method: str, lines: HeaderLines, body: bytes | None
) -> tuple[int, str, HeaderLines, bytes]:
    parts = urlsplit(url)
    if parts.scheme not in _HTTP_SCHEMES or not parts.hostname:
        raise AbortError(f"Fetch API cannot load: {url}")
    port = parts.port or _HTTP_SCHEMES[parts.scheme]
    context = ssl.create_default_context() if parts.scheme == "https" else None
    try:
        reader, writer = await asyncio.open_connection(parts.hostname, port, ssl=context)
    except OSError as error:
        raise AbortError(f"Network connection lost: {error}") from None
    try:
        writer.write(_request_head(parts.netloc, parts, method, lines, body))
        if body:
            writer.write(body)
        await writer.drain()
        return await _read_response(reader, method)
    except (OSError, asyncio.IncompleteReadError, ValueError) as error:
        raise AbortError(f"Network connection lost: {error}") from None
    finally:
        writer.close()


def _request_head(
    host: str, parts: Any, method: str, lines: HeaderLines, body: bytes | None
) -> bytes:
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    given = {name.lower() for name, _ in lines}
    head = [f"{method} {target} HTTP/1.1", f"Host: {host}", "Connection: close"]
    if "accept-encoding" not in given:
        head.append("Accept-Encoding: gzip, deflate")
    if "accept" not in given:
        head.append("Accept: */*")
    head += [f"{name}: {value}" for name, value in lines if name.lower() != "host"]
    if body is not None or method in ("POST", "PUT", "PATCH"):
        head.append(f"Content-Length: {len(body or b'')}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")


async def _read_response(
    reader: asyncio.StreamReader, method: str
) -> tuple[int, str, HeaderLines, bytes]:
    status_line = (await reader.readuntil(b"\r\n")).decode("latin-1").rstrip("\r\n")
    _, code, *reason = status_line.split(" ", 2)
    headers: HeaderLines = []
    while (line := (await reader.readuntil(b"\r\n")).decode("latin-1").rstrip("\r\n")) != "":
        name, _, value = line.partition(":")
        headers.append((name.strip(), value.strip()))
    status = int(code)
    found = {name.lower(): value for name, value in headers}
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        data = b""
    elif found.get("transfer-encoding", "").lower() == "chunked":
        data = await _read_chunked(reader)
    elif "content-length" in found:
        data = await reader.readexactly(int(found["content-length"]))
    else:
        data = await reader.read()
    encoding = found.get("content-encoding", "").lower()
    if encoding in ("gzip", "deflate"):
        data = zlib.decompress(data, 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS)
        headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
    return status, reason[0] if reason else "", headers, data


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    chunks: list[bytes] = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0].strip(), 16)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass
            return b"".join(chunks)
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)
