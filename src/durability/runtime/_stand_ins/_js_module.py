"""The `js` stand-in: the JavaScript globals Worker code reaches for, in Python.

`Date` (`Date.now()` reads the runtime's clock), `Object` (`fromEntries`, `keys`,
`values`, `entries`), `JSON` (`stringify` writes compact JSON as JavaScript does,
`parse` gives Python values), `console` (printed to standard output), `Response`,
`Request`, `Headers` and `fetch` (the runtime's HTTP classes, with JavaScript's
constructors and camelCase names), and `Error`.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable
from datetime import datetime
from types import ModuleType, SimpleNamespace
from typing import Any

from ..._clock import now_ms
from .._http import Request, Response
from .._http_headers import JsHeaders
from .._js_errors import js_error
from .._js_values import JsDict, datetime_ms, js_string, utc_datetime
from .._outbound import fetch as _fetch
from .._websocket import WebSocketPair, WebSocketRequestResponsePair


class JsWebSocketPair(WebSocketPair):
    """`js.WebSocketPair`: its ends take what Cloudflare's take, JavaScript values (tags
    as an array from `to_js`, attachments JavaScript can clone)."""

    _cloudflare_values = True


class JsDate:
    """A JavaScript `Date`: `getTime()`, `valueOf()`, `toISOString()`, `toString()`."""

    def __init__(self, ms: float) -> None:
        self._ms = ms

    @classmethod
    def new(cls, value: object = None) -> JsDate:
        """`new Date()`, `new Date(ms)`, `new Date("2024-01-01T00:00:00Z")`."""
        if value is None:
            return cls(now_ms())
        if isinstance(value, int | float) and not isinstance(value, bool):
            return cls(math.trunc(value) if math.isfinite(value) else math.nan)
        if isinstance(value, datetime):
            return cls(datetime_ms(value))
        try:
            parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return cls(math.nan)
        return cls(datetime_ms(parsed))

    @staticmethod
    def now() -> int:
        """Milliseconds since the epoch, by the runtime's clock."""
        return now_ms()

    def getTime(self) -> float:
        return int(self._ms) if math.isfinite(self._ms) else math.nan

    valueOf = getTime

    def toISOString(self) -> str:
        if not math.isfinite(self._ms):
            raise js_error("RangeError", "Invalid time value", ValueError)
        moment = utc_datetime(int(self._ms))
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"

    toJSON = toISOString

    def toString(self) -> str:
        if not math.isfinite(self._ms):
            return "Invalid Date"
        return js_string(utc_datetime(int(self._ms)))

    def __repr__(self) -> str:
        return self.toString()


def _plain(value: Any) -> Any:
    if isinstance(value, JsDate):
        return value.toISOString()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {js_string(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def stringify(value: Any, replacer: Any = None, space: Any = None) -> str | None:
    """`JSON.stringify(value, null, space)`: compact unless `space` is given."""
    if value is None or callable(value):
        return None if callable(value) else "null"
    indent = space if isinstance(space, int | str) and space else None
    separators = (",", ":") if indent is None else (",", ": ")
    return json.dumps(_plain(value), separators=separators, indent=indent, ensure_ascii=False)


def parse(text: str, reviver: Any = None) -> Any:
    """`JSON.parse(text)`: objects as `JsDict`; bad text raises JavaScript's `SyntaxError`."""
    try:
        return json.loads(text, object_hook=JsDict)
    except (TypeError, ValueError) as error:
        raise js_error("SyntaxError", str(error), ValueError) from None


def _entries(value: Any) -> list[list[Any]]:
    if isinstance(value, dict):
        return [[key, item] for key, item in value.items()]
    return [[str(index), item] for index, item in enumerate(value)]


class JsResponse(Response):
    """`js.Response`: `js.Response.new(body, status=, statusText=, headers=)`,
    `js.Response.json(data)`, and JavaScript's names (`statusText`, `bodyUsed`,
    `arrayBuffer()`)."""

    @classmethod
    def new(cls, body: Any = None, init: dict[str, Any] | None = None, **options: Any) -> Any:
        given = dict(init or {}) | options
        return cls(body, given.get("status"), given.get("statusText", ""), given.get("headers"))

    @staticmethod
    def _json_response(  # type: ignore[override]
        data: Any, init: dict[str, Any] | None = None, **options: Any
    ) -> Any:
        """`Response.json(data)`: `JSON.stringify(data)` as `application/json`."""
        given = dict(init or {}) | options
        lines = list(JsHeaders(given.get("headers")).lines)
        if not any(name.lower() == "content-type" for name, _ in lines):
            lines.append(("content-type", "application/json"))
        text = stringify(data) or ""
        return JsResponse(text.encode(), given.get("status"), given.get("statusText", ""), lines)

    @staticmethod
    def redirect(url: str, status: int = 302) -> Response:
        return Response.redirect(url, status)

    @property
    def statusText(self) -> str:
        return self.status_text

    @property
    def bodyUsed(self) -> bool:
        return self.body_used

    async def arrayBuffer(self) -> Any:
        return await self.buffer()


async def _js_fetch(resource: Any, init: dict[str, Any] | None = None, **options: Any) -> Any:
    """`fetch(resource, init)`: a `js.Response`."""
    return JsResponse(await _fetch(resource, **(dict(init or {}) | options)))


def _log(*args: Any) -> None:
    print(*(a if isinstance(a, str) else stringify(a) or str(a) for a in args), flush=True)


def _error(*args: Any) -> None:
    print(*(a if isinstance(a, str) else stringify(a) or str(a) for a in args), file=sys.stderr)


def fill_js(module: ModuleType) -> None:
    """Fill in the `js` stand-in."""
    module.__dict__.update(
        Date=JsDate,
        Object=SimpleNamespace(
            fromEntries=lambda pairs: JsDict((js_string(k), v) for k, v in _pairs(pairs)),
            keys=lambda value: [entry[0] for entry in _entries(value)],
            values=lambda value: [entry[1] for entry in _entries(value)],
            entries=_entries,
        ),
        JSON=SimpleNamespace(stringify=stringify, parse=parse),
        console=SimpleNamespace(log=_log, info=_log, debug=_log, warn=_error, error=_error),
        Response=JsResponse,
        Request=SimpleNamespace(
            new=lambda input, init=None, **options: Request(input, **(dict(init or {}) | options))
        ),
        Headers=JsHeaders,
        Error=SimpleNamespace(new=lambda message="": js_error("Error", js_string(message))),
        fetch=_js_fetch,
        WebSocketPair=JsWebSocketPair,
        WebSocketRequestResponsePair=WebSocketRequestResponsePair,
    )


def _pairs(pairs: Any) -> Iterable[tuple[Any, Any]]:
    items = pairs.items() if isinstance(pairs, dict) else pairs
    return [(pair[0], pair[1]) for pair in items]
