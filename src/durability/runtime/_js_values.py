"""Python values as they come back from a trip through JavaScript, as on Cloudflare.

On Cloudflare (with `workers-runtime-sdk`, what `pywrangler` deploys), a value handed to
a stub method, returned from one, or stored in key-value storage goes through
JavaScript: the SDK converts it (`python_to_rpc`), JavaScript copies it, and the SDK
converts the copy back (`python_from_rpc`). The embedded runtime applies the same rules,
so a value reads back the same on both hosts:

- dicts come back as `JsDict` (a dict whose keys also read as attributes), their keys
  as JavaScript strings (`1` becomes `"1"`, `True` becomes `"true"`);
- a float with an integral value comes back as an `int` (JavaScript has one number type);
- `bytes` come back as a `memoryview`, sets as sets, a `datetime` as a naive UTC
  `datetime` (milliseconds kept; a naive one is read as UTC, the Workers' time zone),
  an exception as `Exception("Error: <its text>")`;
- tuples and bytearrays are refused with the SDK's `TypeError`, and anything JavaScript
  cannot copy with its `DataCloneError` (a `JsException`).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from .._serialization import MAX_JSON_DEPTH
from ._js_errors import js_error

__all__ = ["JsBigInt", "JsDict", "datetime_ms", "js_string", "to_remote", "utc_datetime"]

MAX_SAFE_INTEGER = 2**53 - 1
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_CANNOT_STORE = "[object Object] could not be cloned."
_CANNOT_STORE_FUNCTION = "function(){} could not be cloned."
_CANNOT_SEND = (
    "Proxy could not be serialized because it is not a valid RPC receiver type. The Proxy "
    "must emulate either a plain object or an RpcTarget, as indicated by the Proxy's "
    "prototype chain."
)


class JsBigInt(int):
    """An int beyond +/-(2**53 - 1), as it comes back from JavaScript (a BigInt there)."""


def from_js_int(value: int) -> int:
    """`value` as JavaScript hands it back: a `JsBigInt` beyond the exact number range."""
    return JsBigInt(value) if abs(value) > MAX_SAFE_INTEGER else value


class JsDict(dict[str, Any]):
    """A dict whose keys also read (and write) as attributes: `d.name` is `d["name"]`.

    What Cloudflare's SDK makes of a JavaScript object; a key that is also the name of a
    dict method (`items`, `keys`) is only reachable as `d["items"]`.
    """

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value


def js_number_text(value: float) -> str:
    """The text JavaScript's `String(number)` gives for `value`."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    exact = Decimal(repr(abs(value))).normalize()
    digits = "".join(map(str, exact.as_tuple().digits))
    count = len(digits)
    point = int(exact.as_tuple().exponent) + count
    if count <= point <= 21:
        text = digits + "0" * (point - count)
    elif 0 < point <= 21:
        text = digits[:point] + "." + digits[point:]
    elif -6 < point <= 0:
        text = "0." + "0" * -point + digits
    else:
        power = point - 1
        mantissa = digits if count == 1 else digits[0] + "." + digits[1:]
        text = f"{mantissa}e{'+' if power >= 0 else '-'}{abs(power)}"
    return sign + text


def js_string(value: object) -> str:
    """What JavaScript's `String(value)` gives once `value` reached it from Python
    (the key Cloudflare's storage uses for a non-string key)."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return js_number_text(value)
    if isinstance(value, list | tuple):
        return ",".join("" if item is None else js_string(item) for item in value)
    if isinstance(value, bytes | bytearray | memoryview):
        return ",".join(str(byte) for byte in bytes(value))
    if isinstance(value, dict):
        return "[object Object]"
    if isinstance(value, set | frozenset):
        return "[object Set]"
    if isinstance(value, datetime):
        return utc_datetime(datetime_ms(value)).strftime(
            "%a %b %d %Y %H:%M:%S GMT+0000 (Coordinated Universal Time)"
        )
    return str(value)


def datetime_ms(value: datetime) -> int:
    """Milliseconds since the epoch of `value` (a naive one is UTC), as a JS `Date` keeps
    them: truncated to the millisecond."""
    moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    delta = moment - EPOCH
    return (delta.days * 86_400_000) + (delta.seconds * 1_000) + delta.microseconds // 1_000


def utc_datetime(ms: int) -> datetime:
    """The naive UTC `datetime` the SDK makes of a JavaScript `Date` of `ms`."""
    return (EPOCH + timedelta(milliseconds=ms)).replace(tzinfo=None)


def refuse_unsendable(value: object, depth: int = 0) -> None:
    """The SDK's check before any conversion: tuples, bytearrays and awaitables, at any
    depth of lists, sets and dict values, raise its `TypeError`."""
    if depth > MAX_JSON_DEPTH:
        raise RecursionError
    if callable(value) and not isinstance(value, type):
        return
    if isinstance(value, tuple | bytearray):
        raise TypeError(f"{type(value)} cannot be sent over RPC.")
    if inspect.isawaitable(value):
        raise TypeError(f"Awaitable {type(value)} cannot be sent over RPC.")
    if isinstance(value, dict):
        for item in value.values():
            refuse_unsendable(item, depth + 1)
    elif isinstance(value, list | set | frozenset):
        for item in value:
            refuse_unsendable(item, depth + 1)


def check_sendable(value: object, what: str = "value") -> None:
    """`refuse_unsendable`, with a value nested too deep refused as `TypeError`."""
    try:
        refuse_unsendable(value)
    except RecursionError:
        raise _too_deep(what) from None


def _too_deep(what: str) -> TypeError:
    return TypeError(f"{what} nests lists and dicts more than {MAX_JSON_DEPTH} levels deep")


def to_remote(value: object, *, stored: bool = False, what: str = "value") -> Any:
    """`value` as the other side of a stub call (or a later storage read, `stored`) sees
    it; raises what Cloudflare raises for a value it cannot send or store (and
    `TypeError` for lists and dicts nested deeper than `MAX_JSON_DEPTH`, named `what`)."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:  # type: ignore[operator]
        return value
    try:
        refuse_unsendable(value)
        return _convert(value, stored, set())
    except RecursionError:
        raise _too_deep(what) from None


def to_remote_arguments(args: Iterable[object], kwargs: dict[str, object]) -> list[Any]:
    """A stub call's arguments as the object gets them: keyword arguments arrive as one
    more positional argument, a `JsDict` of them (JavaScript has no keyword arguments)."""
    converted = [to_remote(arg, what="arguments") for arg in args]
    if kwargs:
        converted.append(to_remote(kwargs, what="keyword arguments"))
    return converted


def _convert(value: object, stored: bool, path: set[int]) -> Any:
    kind = type(value)
    if kind is int:
        return from_js_int(value)  # type: ignore[arg-type]
    if kind is str or kind is bool or value is None:
        return value
    if isinstance(value, float):
        if value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
            return int(value)
        return float(value)
    if isinstance(value, int):
        return from_js_int(int(value))
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dict | list | set | frozenset):
        if id(value) in path:
            raise TypeError("the value contains a reference cycle, which cannot be sent")
        if len(path) >= MAX_JSON_DEPTH:
            raise RecursionError
        path.add(id(value))
        try:
            if isinstance(value, dict):
                return JsDict(
                    (js_string(key), _convert(item, stored, path)) for key, item in value.items()
                )
            if isinstance(value, list):
                return [_convert(item, stored, path) for item in value]
            return {_convert(item, stored, path) for item in value}
        finally:
            path.discard(id(value))
    if isinstance(value, bytes | memoryview):
        return memoryview(bytes(value))
    if isinstance(value, datetime):
        return utc_datetime(datetime_ms(value))
    if isinstance(value, BaseException):
        return Exception(f"Error: {value}")
    if stored:
        message = _CANNOT_STORE_FUNCTION if callable(value) else _CANNOT_STORE
        raise js_error("DataCloneError", message, TypeError)
    if callable(value) or hasattr(value, "js_object"):
        # Functions (a stub to call back on Cloudflare) and the SDK's HTTP objects
        # cross as themselves.
        return value
    raise js_error("DataCloneError", _CANNOT_SEND, TypeError)
