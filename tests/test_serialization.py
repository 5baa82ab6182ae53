"""The stored value envelope: the same text with or without the C encoder, and every
malformed text refused the same way whichever decoding path reads it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from durability import _serialization
from durability._serialization import deserialize, serialize

BODIES: list[Any] = [
    0,
    -1.5,
    1e300,
    True,
    None,
    "",
    "é \u2028 \x00",
    [1, "日本", None, [[]]],
    {"a": {"b": [1.25, "x"]}, "": {}},
]


def _expected(body: Any) -> str:
    return json.dumps({"kind": "value", "value": body}, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize("body", BODIES)
@pytest.mark.parametrize("accelerated", [True, False])
def test_the_envelope_is_the_compact_json_text_on_either_encoder(
    body: Any, accelerated: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The encoder built once gives the text `json.dumps` gives, and so does the path
    for interpreters without the C accelerator."""
    if not accelerated:
        monkeypatch.setattr(_serialization, "_encode_checked", None)
    assert serialize(body) == _expected(body)
    assert deserialize(serialize(body)) == body


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (float("nan"), "must be a finite number"),
        ({1: "x"}, "non-string key"),
        ((1, 2), "must be a JSON value"),
    ],
)
def test_values_that_are_not_json_are_refused_before_encoding(value: Any, error: str) -> None:
    with pytest.raises(TypeError, match=error):
        serialize({"v": [value]})


def test_a_cycle_is_refused_though_the_encoder_skips_its_own_check() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(TypeError, match="reference cycle"):
        serialize(cycle)


def test_whitespace_around_an_envelope_is_read_as_json_allows_it() -> None:
    assert deserialize(' \n{"kind": "value", "value": [1]}\t') == [1]
    assert deserialize('{"kind":"value","value":[2] }') == [2]
    assert deserialize('{"value":3,"kind":"value"}') == 3
    assert deserialize('{"kind":"undefined"}') is None


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "not valid JSON"),
        ("nope", "not valid JSON"),
        ('{"kind":"value","value":1}x', "not valid JSON: Extra data"),
        ('{"kind":"value","value":1} 2', "not valid JSON: Extra data"),
        ('{"kind":"value"', "not valid JSON"),
        ('{"kind":"value","value":}', "not valid JSON"),
        ('{"kind":"value","value":1}}', "not valid JSON: Extra data"),
        ('{"kind":"value","value":[1}', "not valid JSON"),
        ("[1]", "not a durability envelope"),
        ('{"kind":"value"}', "not a durability envelope"),
        ('{"kind":"value","value":1,"extra":2}', "not a durability envelope"),
        ('{"kind":"value","other":1}', "not a durability envelope"),
        ('{"kind":"undefined","value":1}', "not a durability envelope"),
    ],
)
def test_malformed_envelopes_are_refused(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        deserialize(text)
