"""The JSON value envelope stored for payloads, results and log bodies.

A value is stored as the JSON text `{"kind":"value","value":<json>}`; the upstream
`{"kind":"undefined"}` envelope is read back as `None`. Only strict JSON values are
accepted: no NaN or infinities, no tuples, sets, bytes, dates or non-string keys.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ._types import JsonValue


def check_json_value(value: object, what: str = "value") -> JsonValue:
    """Return `value` if it is a strict JSON value, else raise `TypeError` naming the path."""
    _check(value, what, set())
    return value  # type: ignore[return-value]


def _check(value: object, path: str, seen: set[int]) -> None:
    if value is None or isinstance(value, (bool, str)):
        return
    if isinstance(value, int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"{path} must be a finite number, got {value!r}")
        return
    if isinstance(value, list):
        if id(value) in seen:
            raise TypeError(f"{path} contains a reference cycle")
        seen.add(id(value))
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]", seen)
        seen.discard(id(value))
        return
    if isinstance(value, dict):
        if id(value) in seen:
            raise TypeError(f"{path} contains a reference cycle")
        seen.add(id(value))
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{path} has a non-string key {key!r}; JSON keys are strings")
            _check(item, f"{path}[{key!r}]", seen)
        seen.discard(id(value))
        return
    raise TypeError(
        f"{path} must be a JSON value (None, bool, int, float, str, list, dict), "
        f"got {type(value).__name__}"
    )


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


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
    """The stored envelope text of a JSON value; raises `TypeError` for anything else."""
    return '{"kind":"value","value":' + _ENCODER.encode(check_json_value(value, what)) + "}"


def deserialize(text: str) -> JsonValue:
    """The value stored in an envelope; raises `ValueError` if the text is malformed."""
    try:
        envelope: Any = json.loads(text)
    except (TypeError, json.JSONDecodeError) as error:
        raise ValueError(f"stored value is not valid JSON: {error}") from None
    if not isinstance(envelope, dict):
        raise ValueError("stored value is not a durability envelope")
    kind = envelope.get("kind")
    if kind == "undefined" and len(envelope) == 1:
        return None
    if kind == "value" and set(envelope) == {"kind", "value"}:
        result: JsonValue = envelope["value"]
        return result
    raise ValueError("stored value is not a durability envelope")
