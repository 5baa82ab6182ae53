"""The JSON value envelope stored for payloads, results and log bodies.

A value is stored as the JSON text `{"kind":"value","value":<json>}`; the TypeScript
library's `{"kind":"undefined"}` envelope is read back as `None`. Only strict JSON values are
accepted: no NaN or infinities, no tuples, sets, bytes, dates or non-string keys, no
nesting deeper than `MAX_JSON_DEPTH`, and no stored text over `MAX_VALUE_BYTES` (what
Cloudflare refuses is refused on every host, with the same error).
"""

from __future__ import annotations

import json
import json.scanner
import math
from collections.abc import Callable
from json.encoder import encode_basestring
from typing import Any, cast

from ._types import JsonValue

MAX_JSON_DEPTH = 256
"""Lists and dicts nest at most this deep: far beyond real data, well within the
interpreter's recursion limit (on Pyodide too)."""

MAX_VALUE_BYTES = 2_000_000
"""The most UTF-8 bytes one stored value may take: Cloudflare's limit on a string, a
row, and a KV key and value together (2 MB)."""


def check_json_value(value: object, what: str = "value") -> JsonValue:
    """Return `value` if it is a strict JSON value, else raise `TypeError` naming the path."""
    try:
        _check(value, what, set(), 0)
    except _TooDeep:
        raise TypeError(
            f"{what} nests lists and dicts more than {MAX_JSON_DEPTH} levels deep"
        ) from None
    return value  # type: ignore[return-value]


class _TooDeep(Exception):
    """Raised from the depth limit, so the error names the value, not a 256-step path."""


def check_size(what: str, text: str, key: str = "") -> None:
    """Raise `ValueError` if `text` (and `key`, stored with it) is over `MAX_VALUE_BYTES`."""
    if (len(text) + len(key)) * 4 <= MAX_VALUE_BYTES:
        return
    size = _utf8_size(text) + _utf8_size(key)
    if size > MAX_VALUE_BYTES:
        stored = "key and value take" if key else "takes"
        raise ValueError(
            f"{what}: {stored} {size:,} bytes as stored JSON; one value may take at most "
            f"{MAX_VALUE_BYTES:,} bytes (the Cloudflare limit)"
        )


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _check(value: object, path: str, seen: set[int], depth: int) -> None:
    if value is None or isinstance(value, (bool, str)):
        return
    if isinstance(value, int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"{path} must be a finite number, got {value!r}")
        return
    if isinstance(value, (list, dict)):
        if depth >= MAX_JSON_DEPTH:
            raise _TooDeep
        if id(value) in seen:
            raise TypeError(f"{path} contains a reference cycle")
        seen.add(id(value))
        if isinstance(value, list):
            for index, item in enumerate(value):
                _check(item, f"{path}[{index}]", seen, depth + 1)
        else:
            for key, item in value.items():
                if not isinstance(key, str):
                    raise TypeError(f"{path} has a non-string key {key!r}; JSON keys are strings")
                _check(item, f"{path}[{key!r}]", seen, depth + 1)
        seen.discard(id(value))
        return
    raise TypeError(
        f"{path} must be a JSON value (None, bool, int, float, str, list, dict), "
        f"got {type(value).__name__}"
    )


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _checked_encoder() -> Callable[[object, int], list[str]] | None:
    """The C encoder `_ENCODER.encode` builds for each call, built once (`None` without the
    C accelerator): without the cycle check (its `markers` are `None`), so only for
    values `check_json_value` accepted."""
    try:
        from _json import make_encoder
    except ImportError:
        return None
    encoder: Callable[[object, int], list[str]] = make_encoder(
        None, _ENCODER.default, encode_basestring, None, ":", ",", False, False, False
    )
    return encoder


_encode_checked = _checked_encoder()

_scan: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(
    cast(Any, json.JSONDecoder())
)
"""One JSON value from the start of a text, and where it ended (`json.loads` without its
whitespace matching and checks)."""


def to_json_text(value: JsonValue) -> str:
    """Compact JSON text of an already checked value (one reused encoder: `dumps` with
    options builds a new one per call)."""
    return _ENCODER.encode(value)


def copy_json(value: object, what: str = "value") -> JsonValue:
    """A deep copy of a JSON value made through JSON text (raises `TypeError` if not JSON)."""
    checked = check_json_value(value, what)
    result: JsonValue = json.loads(to_json_text(checked))
    return result


def serialize(value: object, what: str = "value") -> str:
    """The stored envelope text of a JSON value.

    Raises `TypeError` for anything but a JSON value, `ValueError` when the text would
    be over `MAX_VALUE_BYTES`.
    """
    checked = check_json_value(value, what)
    if _encode_checked is None or type(checked) is str:
        encoded = _ENCODER.encode(checked)
    else:
        encoded = "".join(_encode_checked(checked, 0))
    text = '{"kind":"value","value":' + encoded + "}"
    check_size(what, text)
    return text


_VALUE_PREFIX = '{"kind":"value","value":'
"""How every envelope `serialize` writes begins."""


def deserialize(text: str) -> JsonValue:
    """The value stored in an envelope; raises `ValueError` if the text is malformed.

    The envelope `serialize` writes is read without building its dict: its value is
    scanned from after the prefix, and is the envelope's when it ends at the closing
    brace; any other text is read as a whole."""
    if text.startswith(_VALUE_PREFIX) and text.endswith("}"):
        try:
            value, end = _scan(text, len(_VALUE_PREFIX))
        except Exception:
            end = -1
        if end == len(text) - 1:
            result: JsonValue = value
            return result
    return _from_envelope(text)


def _from_envelope(text: str) -> JsonValue:
    """`deserialize` of any text: the envelope decoded whole, then checked."""
    try:
        envelope, end = _scan(text, 0)
    except Exception:
        end = -1
    if end != len(text):
        # Whitespace around the value, or not one JSON value: `json.loads` decides.
        try:
            envelope = json.loads(text)
        except (TypeError, json.JSONDecodeError) as error:
            raise ValueError(f"stored value is not valid JSON: {error}") from None
    if not isinstance(envelope, dict):
        raise ValueError("stored value is not a durability envelope")
    kind = envelope.get("kind")
    if kind == "undefined" and len(envelope) == 1:
        return None
    if kind == "value" and len(envelope) == 2 and "value" in envelope:
        result: JsonValue = envelope["value"]
        return result
    raise ValueError("stored value is not a durability envelope")
