"""`Blob`, `File` and `FormData` of the `workers` SDK, holding their bytes in Python.

They behave as `workers-runtime-sdk`'s classes do: a `Blob` is made of str (UTF-8),
bytes-like and `Blob` parts; `FormData` maps names to str or `File` values (a `Blob`
added to a form becomes a `File` named after its field), keeps repeated names, and is sent as
`multipart/form-data`. `js_object` is what JavaScript would be handed (a `js.Blob`).
"""

from __future__ import annotations

import email.parser
import email.policy
import uuid
from collections.abc import Iterator, MutableMapping
from enum import StrEnum
from typing import Any
from urllib.parse import parse_qsl, quote

from .._clock import now_ms
from ._ws_events import BinaryMessage


class BlobEnding(StrEnum):
    """How a `Blob` treats line endings in its str parts."""

    TRANSPARENT = "transparent"
    NATIVE = "native"


class JsBlob:
    """A JavaScript `Blob` (what `Blob.js_object` gives, and what a WebSocket listener
    gets for a binary message where `binaryType` is `"blob"`): its bytes and type, read
    as from JavaScript (`size`, `await arrayBuffer()`, `await text()`)."""

    __slots__ = ("data", "type")

    def __init__(self, data: bytes, content_type: str) -> None:
        self.data = data
        self.type = content_type

    @property
    def size(self) -> int:
        return len(self.data)

    async def arrayBuffer(self) -> BinaryMessage:
        return BinaryMessage(self.data)

    async def bytes(self) -> BinaryMessage:
        return BinaryMessage(self.data)

    async def text(self) -> str:
        return self.data.decode("utf-8", "replace")


def _part_bytes(part: object) -> bytes:
    if isinstance(part, str):
        return part.encode("utf-8")
    if isinstance(part, Blob):
        return part._data
    if isinstance(part, JsBlob):
        return part.data
    try:
        with memoryview(part) as view:  # type: ignore[arg-type]
            return view.tobytes()
    except TypeError:
        raise TypeError(f"Don't know how to handle {type(part)} for Blob()") from None


def _single(parts: object) -> bool:
    if isinstance(parts, str | bytes):
        return True
    try:
        iter(parts)  # type: ignore[call-overload]
    except TypeError:
        return True
    return False


class Blob:
    """Immutable bytes with a content type: `size`, `content_type`, `await text()`,
    `await bytes()`, `slice(start, end, content_type)`. `endings` is accepted and line
    endings are kept as given (what "transparent" means)."""

    def __init__(
        self,
        blob_parts: Any,
        content_type: str | None = None,
        endings: BlobEnding | str | None = None,
    ) -> None:
        if _single(blob_parts):
            if not content_type and isinstance(blob_parts, Blob | JsBlob):
                content_type = (
                    blob_parts.content_type if isinstance(blob_parts, Blob) else blob_parts.type
                )
            blob_parts = [blob_parts]
        self._data = b"".join(_part_bytes(part) for part in blob_parts)
        kind = content_type or ""
        self._type = kind.lower() if kind.isascii() and kind.isprintable() else ""

    @property
    def size(self) -> int:
        return len(self._data)

    @property
    def content_type(self) -> str:
        return self._type

    @property
    def js_object(self) -> JsBlob:
        return JsBlob(self._data, self._type)

    async def text(self) -> str:
        return self._data.decode("utf-8", "replace")

    async def bytes(self) -> bytes:
        return self._data

    def slice(
        self, start: int | None = None, end: int | None = None, content_type: str | None = None
    ) -> Blob:
        return Blob([self._data[slice(start, end)]], content_type)


class File(Blob):
    """A `Blob` with a file name and a last-modified time (ms since the epoch)."""

    def __init__(
        self,
        blob_parts: Any,
        filename: str,
        content_type: str | None = None,
        endings: BlobEnding | str | None = None,
        last_modified: int | None = None,
    ) -> None:
        if not last_modified and isinstance(blob_parts, File):
            last_modified = blob_parts.last_modified
        super().__init__(blob_parts, content_type, endings)
        self._name = str(filename)
        self._modified = int(last_modified) if last_modified else now_ms()

    @property
    def name(self) -> str:
        return self._name

    @property
    def last_modified(self) -> int:
        return self._modified


FormValue = str | File


def _form_value(key: str, value: object, filename: str | None = None) -> FormValue:
    if isinstance(value, File) and filename is None:
        return value
    if isinstance(value, Blob | JsBlob):
        blob = value if isinstance(value, Blob) else Blob(value)
        return File(blob, filename or key, blob.content_type)
    return str(value)


class FormData(MutableMapping[str, Any]):
    """Form fields: `form["name"]` (the first value, or `None`), `append`, `get_all`,
    `items()` with repeated names; values are str or `File`."""

    def __init__(self, form_data: Any = None) -> None:
        self._entries: list[tuple[str, FormValue]] = []
        if not form_data:
            return
        if isinstance(form_data, FormData):
            self._entries = list(form_data._entries)
        elif isinstance(form_data, dict):
            for key, value in form_data.items():
                self.append(key, value)
        else:
            raise TypeError("Expected form_data to be a dict or an instance of FormData")

    def __getitem__(self, key: str) -> Any:
        for name, value in self._entries:
            if name == key:
                return value
        return None

    def __setitem__(self, key: str, value: Any) -> None:
        if isinstance(value, list):
            raise TypeError("Expected single item in arguments to FormData.__setitem__")
        converted = _form_value(key, value)
        entries = [entry for entry in self._entries if entry[0] != key]
        at = next((i for i, entry in enumerate(self._entries) if entry[0] == key), None)
        entries.insert(len(entries) if at is None else at, (key, converted))
        self._entries = entries

    def append(self, key: str, value: Any, filename: str | None = None) -> None:
        self._entries.append((key, _form_value(key, value, filename)))

    def delete(self, key: str) -> None:
        self._entries = [entry for entry in self._entries if entry[0] != key]

    def __delitem__(self, key: str) -> None:
        self.delete(key)

    def __contains__(self, key: object) -> bool:
        return any(name == key for name, _ in self._entries)

    def __iter__(self) -> Iterator[str]:
        return iter([name for name, _ in self._entries])

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> Iterator[str]:  # type: ignore[override]
        return iter([name for name, _ in self._entries])

    def values(self) -> Iterator[Any]:  # type: ignore[override]
        return iter([value for _, value in self._entries])

    def items(self) -> Iterator[tuple[str, Any]]:  # type: ignore[override]
        return iter(list(self._entries))

    def get_all(self, key: str) -> list[Any]:
        return [value for name, value in self._entries if name == key]

    @property
    def js_object(self) -> FormData:
        return self

    def encode(self) -> tuple[bytes, str]:
        """The multipart body and its content type."""
        boundary = f"----formdata-durability-{uuid.uuid4().hex}"
        chunks: list[bytes] = []
        for name, value in self._entries:
            disposition = f'form-data; name="{quote(name, safe=" ")}"'
            head = f"--{boundary}\r\nContent-Disposition: {disposition}"
            if isinstance(value, File):
                head += f'; filename="{quote(value.name, safe=" ")}"\r\n'
                head += f"Content-Type: {value.content_type or 'application/octet-stream'}"
                data = value._data
            else:
                data = value.encode("utf-8")
            chunks.append(head.encode("utf-8") + b"\r\n\r\n" + data + b"\r\n")
        chunks.append(f"--{boundary}--\r\n".encode())
        return b"".join(chunks), f"multipart/form-data; boundary={boundary}"


def parse_form(data: bytes, content_type: str) -> FormData:
    """A request or response body as `FormData` (urlencoded or multipart), or the
    `TypeError` JavaScript raises for another content type."""
    kind = content_type.split(";", 1)[0].strip().lower()
    form = FormData()
    if kind == "application/x-www-form-urlencoded":
        for name, value in parse_qsl(data.decode("utf-8", "replace"), keep_blank_values=True):
            form.append(name, value)
        return form
    if kind != "multipart/form-data":
        raise TypeError(
            "Unrecognized Content-Type header value. FormData can only parse the following "
            "MIME types: multipart/form-data, application/x-www-form-urlencoded"
        )
    header = f"Content-Type: {content_type}\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(header + data)
    for part in message.iter_parts():
        name = str(part.get_param("name", header="content-disposition"))
        payload = part.get_payload(decode=True)
        body = payload if isinstance(payload, bytes) else b""
        filename = part.get_filename()
        if filename is None:
            form.append(name, body.decode("utf-8", "replace"))
        else:
            form.append(name, File([body], filename, part.get_content_type()))
    return form
