"""The body of a request or response: what it may be made of, and reading it once.

A body is given as str (sent as UTF-8 `text/plain;charset=UTF-8`), bytes, `FormData`
(`multipart/form-data`), a `js.Blob` (`Blob.js_object`), or a stream (another
message's `body`); it is read once, by `text()`, `json()`, `bytes()`, `buffer()`,
`form_data()` or `blob()`. `body` is the stream itself (`None` when there is no body):
`async for chunk in message.body` gives its bytes.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from typing import Any

from ._blob import Blob, FormData, JsBlob, parse_form
from ._http_headers import HeaderLines, has_header

TEXT_TYPE = "text/plain;charset=UTF-8"


class ArrayBuffer(bytes):
    """A JavaScript `ArrayBuffer` as Pyodide shows it: `to_bytes()`, `to_py()`,
    `to_memoryview()`, `byteLength` (and it is `bytes` as well)."""

    def to_bytes(self) -> bytes:
        return bytes(self)

    def to_py(self) -> memoryview:
        return memoryview(bytes(self))

    def to_memoryview(self) -> memoryview:
        return memoryview(bytes(self))

    def to_string(self, encoding: str = "utf-8") -> str:
        return self.decode(encoding)

    @property
    def byteLength(self) -> int:
        return len(self)


class ReadableStream:
    """A body as a stream of bytes: `async for chunk in stream`, read once."""

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks
        self.locked = False

    @classmethod
    def of(cls, data: bytes) -> ReadableStream:
        """A stream giving `data` in one chunk."""

        async def once() -> AsyncIterator[bytes]:
            if data:
                yield data

        return cls(once())

    def __aiter__(self) -> AsyncIterator[bytes]:
        if self.locked:
            raise TypeError("This ReadableStream is currently locked to a reader.")
        self.locked = True
        return self._chunks

    async def read_all(self) -> bytes:
        """Every chunk, joined."""
        return b"".join([chunk async for chunk in self])

    def tee(self) -> tuple[ReadableStream, ReadableStream]:
        """Two streams that each give every chunk of this one (which is used up)."""
        source = self.__aiter__()
        seen: list[bytes] = []
        state = {"ended": False}

        async def branch() -> AsyncIterator[bytes]:
            index = 0
            while True:
                if index < len(seen):
                    yield seen[index]
                    index += 1
                elif state["ended"]:
                    return
                else:
                    try:
                        seen.append(await anext(source))
                    except StopAsyncIteration:
                        state["ended"] = True

        return ReadableStream(branch()), ReadableStream(branch())


Content = bytes | ReadableStream | None


def body_content(body: object, what: str) -> tuple[Content, str | None]:
    """What a `body=` argument holds, and the content type it implies (if any)."""
    if body is None:
        return None, None
    if isinstance(body, str):
        return body.encode("utf-8"), TEXT_TYPE
    if isinstance(body, bytes):
        return bytes(body), None
    if isinstance(body, FormData):
        data, kind = body.encode()
        return data, kind
    if isinstance(body, JsBlob):
        return body.data, body.type or None
    if isinstance(body, ReadableStream):
        return body, None
    raise TypeError(f"Unsupported type in {what}: {type(body).__name__}")


class Body(ABC):
    """The body half of `Request` and `Response` (see the module docstring)."""

    _content: Content
    _used: bool
    _lines: HeaderLines

    def _init_body(self, content: Content, content_type: str | None) -> None:
        self._content = content
        self._used = False
        if content_type is not None and not has_header(self._lines, "content-type"):
            self._lines.append(("content-type", content_type))

    @abstractmethod
    def _used_error(self) -> Exception:
        """The error reading a body a second time raises (it differs by class)."""

    @property
    def header_lines(self) -> HeaderLines:
        """The header lines as set, in order and case (what goes on the wire)."""
        return list(self._lines)

    @property
    def body(self) -> ReadableStream | None:
        """The body as a stream, or `None` when there is none."""
        content = self._content
        if content is None:
            return None
        if isinstance(content, bytes):
            self._content = content = ReadableStream.of(content)
        return content

    @property
    def body_used(self) -> bool:
        content = self._content
        return self._used or (isinstance(content, ReadableStream) and content.locked)

    async def _take(self) -> bytes:
        """The whole body, which counts as read from now on."""
        if self.body_used:
            raise self._used_error()
        self._used = True
        content = self._content
        if content is None:
            return b""
        if isinstance(content, bytes):
            return content
        return await content.read_all()

    def _copy_content(self) -> Content:
        """The content for a clone (a stream is split in two, one for each)."""
        if self.body_used:
            raise self._used_error()
        content = self._content
        if isinstance(content, ReadableStream):
            self._content, content = content.tee()
        return content

    async def text(self) -> str:
        return (await self._take()).decode("utf-8", "replace")

    async def json(self, **kwargs: Any) -> Any:
        return json.loads(await self.text(), **kwargs)

    async def bytes(self) -> bytes:
        return await self._take()

    async def buffer(self) -> ArrayBuffer:
        return ArrayBuffer(await self._take())

    async def form_data(self) -> FormData:
        kind = next((v for k, v in self._lines if k.lower() == "content-type"), "")
        return parse_form(await self._take(), kind)

    async def blob(self) -> Blob:
        kind = next((v for k, v in self._lines if k.lower() == "content-type"), None)
        return Blob([await self._take()], kind)
