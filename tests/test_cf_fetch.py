"""`workers.fetch` (and `js.fetch`, `pyodide.http.pyfetch`) send real HTTP from a served
worker, as `fetch` does on Cloudflare: bodies, headers, redirects, compression, errors."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator

import pytest

import durability.runtime  # noqa: F401  (installs the stand-ins)
from durability.runtime._js_errors import AbortError, JsException

Handler = dict[str, tuple[int, list[tuple[str, str]], bytes]]


class Origin:
    """A real HTTP/1.1 server on a loopback port, answering from a table by path, and
    remembering each request it got (request line, headers, body)."""

    def __init__(self, answers: Handler) -> None:
        self.answers = answers
        self.seen: list[tuple[str, dict[str, str], bytes]] = []
        self.server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = (await reader.readuntil(b"\r\n")).decode().strip()
        headers: dict[str, str] = {}
        while (header := (await reader.readuntil(b"\r\n")).decode().strip()) != "":
            name, _, value = header.partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self.seen.append((line, headers, body))
        path = line.split(" ")[1]
        status, extra, content = self.answers.get(path, (404, [], b"missing"))
        head = [f"HTTP/1.1 {status} Whatever", *(f"{k}: {v}" for k, v in extra)]
        if not any(k.lower() == "transfer-encoding" for k, _ in extra):
            head.append(f"Content-Length: {len(content)}")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + content)
        await writer.drain()
        writer.close()


@pytest.fixture
async def origin() -> AsyncIterator[Origin]:
    chunked = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    served = Origin(
        {
            "/plain": (200, [("Content-Type", "text/plain"), ("X-One", "1")], b"plain body"),
            "/json": (201, [("Content-Type", "application/json")], b'{"a": [1, null]}'),
            "/gzip": (200, [("Content-Encoding", "gzip")], gzip.compress(b"unzipped")),
            "/chunked": (200, [("Transfer-Encoding", "chunked")], chunked),
            "/moved": (302, [("Location", "/plain")], b""),
            "/see-other": (303, [("Location", "/echo")], b""),
            "/echo": (200, [], b"echo"),
            "/teapot": (418, [], b"short and stout"),
        }
    )
    served.server = await asyncio.start_server(served.serve, "127.0.0.1", 0)
    try:
        yield served
    finally:
        served.server.close()
        await served.server.wait_closed()


async def test_fetch_reads_status_headers_and_body(origin: Origin) -> None:
    """A GET gives the status, the headers (as the SDK shows them) and the body."""
    from workers import fetch

    response = await fetch(f"{origin.url}/plain")
    assert (response.status, response.ok, response.headers["x-one"]) == (200, True, "1")
    assert response.headers.get("content-type") == "text/plain"
    assert await response.text() == "plain body"
    assert response.url == f"{origin.url}/plain"


async def test_fetch_sends_method_headers_and_body(origin: Origin) -> None:
    """A POST with headers and a str body reaches the server as sent."""
    from workers import fetch

    response = await fetch(
        f"{origin.url}/echo", method="POST", headers={"X-Probe": "yes"}, body="payload"
    )
    assert await response.text() == "echo"
    line, headers, body = origin.seen[-1]
    assert line == "POST /echo HTTP/1.1"
    assert headers["x-probe"] == "yes"
    assert headers["content-type"] == "text/plain;charset=UTF-8"
    assert body == b"payload"


async def test_fetch_decodes_gzip_and_chunked_bodies(origin: Origin) -> None:
    """Compressed and chunked answers are read whole and decoded."""
    from workers import fetch

    assert await (await fetch(f"{origin.url}/gzip")).text() == "unzipped"
    assert await (await fetch(f"{origin.url}/chunked")).text() == "hello world"


async def test_fetch_follows_redirects_unless_told_not_to(origin: Origin) -> None:
    """Redirects are followed (a 303 turns a POST into a GET); `redirect="manual"` gives
    the 3xx itself."""
    from workers import fetch

    followed = await fetch(f"{origin.url}/moved")
    assert (followed.status, followed.redirected, followed.url) == (
        200,
        True,
        f"{origin.url}/plain",
    )
    assert await followed.text() == "plain body"
    seen = await fetch(f"{origin.url}/see-other", method="POST", body="x")
    assert await seen.text() == "echo"
    assert origin.seen[-1][0] == "GET /echo HTTP/1.1"
    manual = await fetch(f"{origin.url}/moved", redirect="manual")
    assert (manual.status, manual.headers["location"]) == (302, "/plain")


async def test_error_statuses_are_responses_and_raise_for_status(origin: Origin) -> None:
    """A 4xx is an answer like another; `raise_for_status()` raises pyodide's error."""
    from pyodide.http import HttpStatusError
    from workers import fetch

    response = await fetch(f"{origin.url}/teapot")
    assert (response.status, response.ok) == (418, False)
    with pytest.raises(HttpStatusError, match="418 Client Error"):
        response.raise_for_status()


async def test_fetch_failures_raise_as_on_cloudflare(origin: Origin) -> None:
    """A relative URL is a JsException (TypeError: Invalid URL), a scheme fetch cannot
    load or a refused connection an AbortError."""
    from workers import fetch

    with pytest.raises(JsException, match=r"^TypeError: Invalid URL: /relative$"):
        await fetch("/relative")
    with pytest.raises(AbortError, match=r"^Fetch API cannot load: ftp://example\.com/$"):
        await fetch("ftp://example.com/")
    closed = origin.url
    assert origin.server is not None
    origin.server.close()
    await origin.server.wait_closed()
    with pytest.raises(AbortError):
        await fetch(f"{closed}/plain")


async def test_js_fetch_and_pyfetch_use_the_same_client(origin: Origin) -> None:
    """`js.fetch` gives a JavaScript-shaped response, `pyodide.http.pyfetch` Pyodide's."""
    import js
    from pyodide.http import pyfetch

    answer = await js.fetch(f"{origin.url}/json")
    assert (answer.status, answer.statusText) == (201, "Whatever")
    assert await answer.json() == {"a": [1, None]}
    fetched = await pyfetch(f"{origin.url}/plain")
    assert await fetched.bytes() == b"plain body"
