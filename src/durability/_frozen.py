"""Frozen dataclass instances built on hot paths without their constructor."""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")

_new_object = object.__new__
_set_state = object.__setattr__


def frozen_with(cls: type[T], fields: dict[str, Any]) -> T:
    """The instance of the frozen dataclass `cls` (one with a `__dict__`, without
    `__post_init__`) whose init fields are `fields`, each of them (the others, such as
    an event's `type`, are the class's defaults). They are set as its whole `__dict__`
    at once: the dataclass's own `__init__` sets each field through
    `object.__setattr__`, which costs more than the rest of building it, and the engine
    builds a call and an event per attempt."""
    instance: T = _new_object(cls)
    _set_state(instance, "__dict__", fields)
    return instance
