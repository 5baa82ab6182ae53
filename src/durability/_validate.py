"""Option and argument checks shared by every capability (messages name the option)."""

from __future__ import annotations

from datetime import datetime

from ._types import MAX_SAFE_INTEGER


class NotAnIntegerError(TypeError, ValueError):
    """A float where an integer is needed: a wrong type in Python (`TypeError`), and a bad
    number to code written against the TypeScript library, whose checks raise a
    `RangeError` for non-integers (`ValueError` here). Either `except` catches it."""


def check_int(name: str, value: object, rule: str = "an integer") -> int:
    """`value` as an int; `TypeError` for bools and anything else, `NotAnIntegerError`
    (a `TypeError` and a `ValueError`) "<name> must be <rule>" for a float."""
    if isinstance(value, float):
        raise NotAnIntegerError(f"{name} must be {rule}, got float")
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    return value


def check_positive_int(name: str, value: object) -> int:
    """A positive int, else `ValueError` "<name> must be a positive integer"."""
    number = check_int(name, value, "a positive integer")
    if number < 1 or number > MAX_SAFE_INTEGER:
        raise ValueError(f"{name} must be a positive integer")
    return number


def check_non_negative_int(name: str, value: object) -> int:
    """A safe int >= 0, else `ValueError` "<name> must be a non-negative safe integer"."""
    number = check_int(name, value)
    if number < 0 or number > MAX_SAFE_INTEGER:
        raise ValueError(f"{name} must be a non-negative safe integer")
    return number


def to_epoch_ms(name: str, value: object) -> int:
    """Milliseconds since the epoch from an int or an aware `datetime`."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{name} must be an aware datetime (naive datetimes are ambiguous)")
        return check_non_negative_int(name, round(value.timestamp() * 1000))
    return int(check_non_negative_int(name, value))


def check_callable(name: str, value: object) -> None:
    """`TypeError` "<name> must be callable" unless `value` is callable."""
    if not callable(value):
        raise TypeError(f"{name} must be callable, got {type(value).__name__}")


def check_utf8(name: str, value: str) -> str:
    """`value` unchanged if it encodes as UTF-8, else `ValueError` naming `name`.

    A lone surrogate (e.g. ``"\\ud800"``) is a valid `str` that SQLite cannot bind, so
    every stored user-given string is checked here before anything is written.
    """
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{name} must be valid UTF-8 text (no lone surrogates)") from None
    return value
