"""HTTP headers as a Cloudflare Python Worker sees them.

A request or response keeps its header lines as given (sent in that order and case).
Python code reads them as `workers-runtime-sdk` shows them: an `http.client.HTTPMessage`
that is also a `Mapping`, built afresh on each read (changing it changes nothing), with
names in lower case and in name order, repeated names joined with ", ", and each
`Set-Cookie` line kept apart (first). `js.Headers` is the JavaScript class, for code
that builds headers itself.
"""

from __future__ import annotations

import http.client
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ._js_values import js_string

HeaderLines = list[tuple[str, str]]


class HTTPMessageMapping(http.client.HTTPMessage, Mapping[str, str]):  # type: ignore[misc]
    """Headers as the SDK hands them to Python: `headers["name"]` (`None` if absent),
    `get`, `get_all`, `items()`, case-insensitive `in`."""


class JsHeaders:
    """`js.Headers`: build with `js.Headers.new(init)`; `get`/`has`/`set`/`append`/
    `delete`, iteration as `[name, value]` pairs in name order."""

    def __init__(self, init: object = None) -> None:
        self._lines: HeaderLines = [] if init is None else header_lines(init)

    @classmethod
    def new(cls, init: object = None) -> JsHeaders:
        """`new Headers(init)`."""
        return cls(init)

    def get(self, name: str) -> str | None:
        """The value of `name` (repeated ones joined with ", "), or `None`."""
        found = [value for key, value in self._lines if key.lower() == name.lower()]
        return ", ".join(found) if found else None

    def has(self, name: str) -> bool:
        return any(key.lower() == name.lower() for key, _ in self._lines)

    def set(self, name: str, value: object) -> None:
        self.delete(name)
        self._lines.append((name, js_string(value).strip()))

    def append(self, name: str, value: object) -> None:
        self._lines.append((name, js_string(value).strip()))

    def delete(self, name: str) -> None:
        self._lines = [(key, value) for key, value in self._lines if key.lower() != name.lower()]

    def getSetCookie(self) -> list[str]:
        """Every `Set-Cookie` value, one per line."""
        return [value for key, value in self._lines if key.lower() == "set-cookie"]

    def entries(self) -> Iterator[list[str]]:
        return iter([[name, value] for name, value in combined(self._lines)])

    def keys(self) -> Iterator[str]:
        return iter([name for name, _ in combined(self._lines)])

    def values(self) -> Iterator[str]:
        return iter([value for _, value in combined(self._lines)])

    def __iter__(self) -> Iterator[list[str]]:
        return self.entries()

    @property
    def lines(self) -> HeaderLines:
        """The header lines as set, in order."""
        return list(self._lines)


def header_lines(init: object) -> HeaderLines:
    """The lines of a `headers=` argument: a dict, a list of (name, value) pairs, or a
    `js.Headers`; anything else raises the SDK's `TypeError`."""
    if isinstance(init, JsHeaders):
        return init.lines
    if isinstance(init, http.client.HTTPMessage):
        return [(str(name), str(value)) for name, value in init.items()]
    pairs: Iterable[Any]
    if isinstance(init, dict):
        pairs = init.items()
    elif isinstance(init, list):
        pairs = init
    else:
        raise TypeError("Received unexpected type for headers argument")
    lines: HeaderLines = []
    for pair in pairs:
        name, value = pair
        lines.append((js_string(name), js_string(value).strip()))
    return lines


def combined(lines: HeaderLines) -> list[tuple[str, str]]:
    """The lines as JavaScript's `Headers` iterates them: lower-case names in order,
    repeated names joined with ", ", each `set-cookie` on its own."""
    joined: dict[str, list[str]] = {}
    cookies: list[str] = []
    for name, value in lines:
        key = name.lower()
        if key == "set-cookie":
            cookies.append(value)
        else:
            joined.setdefault(key, []).append(value)
    pairs = [(key, ", ".join(values)) for key, values in joined.items()]
    pairs.extend(("set-cookie", value) for value in cookies)
    return sorted(pairs, key=lambda pair: pair[0])


def header_view(lines: HeaderLines) -> HTTPMessageMapping:
    """The headers as Python code reads them (see the module docstring)."""
    view = HTTPMessageMapping()
    for name, value in lines:
        if name.lower() == "set-cookie":
            view.add_header("Set-Cookie", value)
    for name, value in combined(lines):
        if name != "set-cookie":
            view.add_header(name, value)
    return view


def has_header(lines: HeaderLines, name: str) -> bool:
    """Whether a line named `name` (any case) is there."""
    return any(key.lower() == name for key, _ in lines)
