"""Object ids: stable 64-hex names for the objects of one namespace."""

from __future__ import annotations

import hashlib
import re

from .._uuid import random_bytes
from .._validate import check_utf8
from ._js_errors import js_error

_HEX_ID = re.compile(r"[0-9a-f]{64}")


class ObjectId:
    """The id of one object in one namespace.

    `str(id)` is a stable 64-hex string (the same name always gives the same id);
    `id.name` is the name it was made from, or `None` for a unique or parsed id.
    """

    __slots__ = ("_hex", "_name", "_namespace")

    def __init__(self, namespace: str, hex_id: str, name: str | None) -> None:
        self._namespace = namespace
        self._hex = hex_id
        self._name = name

    @property
    def name(self) -> str | None:
        """The name this id was derived from, if any."""
        return self._name

    @property
    def namespace(self) -> str:
        """The binding name of the namespace the id belongs to."""
        return self._namespace

    def __str__(self) -> str:
        return self._hex

    def toString(self) -> str:
        """`str(id)` under its Cloudflare name: the 64-hex id."""
        return self._hex

    def equals(self, other: object) -> bool:
        """`id == other` under its Cloudflare name (which takes an id only)."""
        if not isinstance(other, ObjectId):
            raise js_error(
                "TypeError",
                "Failed to execute 'equals' on 'DurableObjectId': parameter 1 is not of type "
                "'DurableObjectId'.",
                TypeError,
            )
        return self == other

    def __repr__(self) -> str:
        return f"ObjectId({self._namespace}:{self._hex[:12]}..., name={self._name!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ObjectId):
            return NotImplemented
        return self._hex == other._hex and self._namespace == other._namespace

    def __hash__(self) -> int:
        return hash((self._namespace, self._hex))


def id_from_name(namespace: str, name: object) -> ObjectId:
    """The id that `name` always maps to in `namespace`."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    check_utf8("name", name)
    digest = hashlib.sha256(f"{namespace}\x00{name}".encode()).hexdigest()
    return ObjectId(namespace, digest, name)


def new_unique_id(namespace: str) -> ObjectId:
    """A fresh random id that no name maps to (in practice)."""
    return ObjectId(namespace, random_bytes(32).hex(), None)


def id_from_string(namespace: str, text: object) -> ObjectId:
    """Parse `str(id)` back into an id of `namespace` (its name is not recoverable)."""
    if not isinstance(text, str):
        raise TypeError(f"id must be a string, got {type(text).__name__}")
    if _HEX_ID.fullmatch(text) is None:
        raise ValueError("id must be a 64-character lowercase hex string")
    return ObjectId(namespace, text, None)
