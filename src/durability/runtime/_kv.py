"""Cloudflare's key-value storage API of a SQLite-backed object, over `_durability_kv`.

The methods take their arguments as JavaScript does, since that is what a Cloudflare
Python Worker calls: `put(key, value)` or `put({key: value, ...})`, `get(key)` or
`get([keys])`, `delete(key)` or `delete([keys])`, `list(options)` where keyword
arguments become the options object (`list(prefix="a")` is `list({"prefix": "a"})`).
A key that is not a string is turned into one as JavaScript does (`1` is `"1"`);
values come back as Cloudflare returns them (see `_js_values`), and bad calls raise
Cloudflare's errors.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from typing import Any

from .._serialization import check_size
from ._database import Database
from ._js_errors import js_error
from ._js_values import JsDict, check_sendable, js_string, to_remote
from ._kv_codec import decode, encode

__all__ = ["KeyValue", "SyncKeyValue"]

_CHUNK = 100
"""Keys per statement of a batch (the SQL limit on bound parameters)."""

_PUT_FORMS = (
    "put() may only be called with a single key-value pair and optional options as "
    "put(key, value, options) or with multiple key-value pairs and optional options as "
    "put(entries, options)"
)
_LIST_OPTIONS = ("start", "startAfter", "end", "prefix", "reverse", "limit")


def js_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """A call's arguments as JavaScript gets them: keywords become one last object, and
    the SDK's refusals (tuples, bytearrays) apply to every argument."""
    if kwargs:
        args = (*args, dict(kwargs))
    for arg in args:
        check_sendable(arg)
    return args


def _is_js_object(value: object) -> bool:
    """Whether `value` reaches JavaScript as an object (not a string, number or array)."""
    return not (value is None or isinstance(value, str | int | float | list))


def _prefix_end(prefix: str) -> str | None:
    """The smallest string above every string starting with `prefix` (None: unbounded)."""
    stem = prefix.rstrip(chr(sys.maxunicode))
    if not stem:
        return None
    following = ord(stem[-1]) + 1
    if 0xD800 <= following <= 0xDFFF:
        following = 0xE000
    return stem[:-1] + chr(following)


def _limit(value: object) -> int:
    """The limit as JavaScript reads it (a number, or a string or bool made one,
    truncated); below 1 (or not a number) is refused."""
    number: float
    if isinstance(value, bool | int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip() or "0")
        except ValueError:
            number = math.nan
    else:
        number = math.nan
    if not number >= 1:
        raise js_error("TypeError", "List limit must be positive.", ValueError)
    return int(number) if math.isfinite(number) else sys.maxsize


class KeyValue:
    """The key-value operations; `enter()` gives the database with the turn's
    transaction open (see `ObjectStorage.enter`)."""

    __slots__ = ("_enter",)

    def __init__(self, enter: Callable[[], Database]) -> None:
        self._enter = enter

    def get(self, args: tuple[Any, ...]) -> Any:
        """`get(key)`: the value or `None`; `get([keys])`: a `JsDict` of those found."""
        if not args:
            raise js_error("TypeError", _not_key("get"), TypeError)
        database = self._enter()
        if isinstance(args[0], list):
            return self._get_many(database, [js_string(key) for key in args[0]])
        rows = database.query("SELECT value FROM _durability_kv WHERE key = ?", js_string(args[0]))
        return decode(rows[0][0]) if rows else None

    def _get_many(self, database: Database, keys: list[str]) -> JsDict:
        found: list[tuple[str, str]] = []
        unique = sorted(set(keys))
        for start in range(0, len(unique), _CHUNK):
            chunk = unique[start : start + _CHUNK]
            found.extend(
                database.query(
                    "SELECT key, value FROM _durability_kv WHERE key IN ("
                    + ", ".join("?" * len(chunk))
                    + ")",
                    *chunk,
                )
            )
        return JsDict((key, decode(text)) for key, text in sorted(found))

    def put(self, args: tuple[Any, ...]) -> None:
        """`put(key, value)` or `put({key: value, ...})`; all or nothing."""
        if args and isinstance(args[0], dict):
            if len(args) > 1 and not isinstance(args[1], dict):
                raise js_error("TypeError", _PUT_FORMS, TypeError)
            pairs = [(js_string(key), value) for key, value in args[0].items()]
        elif not args:
            raise js_error(
                "TypeError",
                "Failed to execute 'put' on 'DurableObjectStorage': parameter 1 is not of "
                "type 'string or object'.",
                TypeError,
            )
        elif _is_js_object(args[0]):
            raise js_error("TypeError", _PUT_FORMS, TypeError)
        elif len(args) < 2:
            raise js_error("TypeError", "put() called with undefined value.", TypeError)
        else:
            pairs = [(js_string(args[0]), args[1])]
        stored = []
        for key, value in pairs:
            text = encode(to_remote(value, stored=True))
            check_size("value", text, key)
            stored.append((key, text))
        database = self._enter()
        for key, text in stored:
            database.execute(
                "INSERT INTO _durability_kv (key, value) VALUES (?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                key,
                text,
            )

    def delete(self, args: tuple[Any, ...]) -> bool | int:
        """`delete(key)`: whether it existed; `delete([keys])`: how many existed."""
        if not args:
            raise js_error("TypeError", _not_key("delete"), TypeError)
        database = self._enter()
        if not isinstance(args[0], list):
            key = js_string(args[0])
            return database.execute("DELETE FROM _durability_kv WHERE key = ?", key) > 0
        unique = sorted({js_string(key) for key in args[0]})
        deleted = 0
        for start in range(0, len(unique), _CHUNK):
            chunk = unique[start : start + _CHUNK]
            deleted += database.execute(
                "DELETE FROM _durability_kv WHERE key IN (" + ", ".join("?" * len(chunk)) + ")",
                *chunk,
            )
        return deleted

    def list(self, args: tuple[Any, ...], *, where: str = "DurableObjectStorage") -> JsDict:
        """`list(options)`: the pairs in key order (`reverse`), within `start`/`startAfter`
        to `end`, starting with `prefix`, at most `limit` of them."""
        options = args[0] if args else None
        if options is None:
            options = {}
        elif not isinstance(options, dict):
            raise js_error(
                "TypeError",
                f"Failed to execute 'list' on '{where}': parameter 1 is not of type 'ListOptions'.",
                TypeError,
            )
        given = {name: options[name] for name in _LIST_OPTIONS if name in options}
        if "start" in given and "startAfter" in given:
            raise js_error(
                "TypeError", "list() cannot be called with both start and startAfter values."
            )
        clauses: list[str] = []
        bindings: list[object] = []
        for name, operator in (("start", ">="), ("startAfter", ">"), ("end", "<")):
            if name in given:
                clauses.append(f"key {operator} ?")
                bindings.append(js_string(given[name]))
        if "prefix" in given:
            prefix = js_string(given["prefix"])
            clauses.append("key >= ?")
            bindings.append(prefix)
            end = _prefix_end(prefix)
            if end is not None:
                clauses.append("key < ?")
                bindings.append(end)
        limit = _limit(given["limit"]) if "limit" in given else -1
        order = "DESC" if given.get("reverse") else "ASC"
        where_sql = " WHERE " + " AND ".join(clauses) if clauses else ""
        rows = self._enter().query(
            f"SELECT key, value FROM _durability_kv{where_sql} ORDER BY key {order} LIMIT ?",
            *bindings,
            limit,
        )
        return JsDict((key, decode(text)) for key, text in rows)


def _not_key(method: str) -> str:
    return (
        f"Failed to execute '{method}' on 'DurableObjectStorage': parameter 1 is not of "
        "type 'string or Array'."
    )


class SyncKeyValue:
    """`ctx.storage.kv`: the same pairs, read and written synchronously (no await)."""

    __slots__ = ("_kv",)

    def __init__(self, kv: KeyValue) -> None:
        self._kv = kv

    def get(self, *args: Any, **kwargs: Any) -> Any:
        """The value stored under the key, or `None`."""
        args = js_arguments(args, kwargs)
        if not args:
            raise js_error("TypeError", _not_sync("get", 1, "string"), TypeError)
        return self._kv.get((js_string(args[0]),))

    def put(self, *args: Any, **kwargs: Any) -> None:
        """Store `value` under `key`."""
        args = js_arguments(args, kwargs)
        if len(args) < 2:
            raise js_error("TypeError", _not_sync("put", 2, "Value"), TypeError)
        self._kv.put((js_string(args[0]), args[1]))

    def delete(self, *args: Any, **kwargs: Any) -> bool:
        """Remove the key; whether it existed."""
        args = js_arguments(args, kwargs)
        if not args:
            raise js_error("TypeError", _not_sync("delete", 1, "string"), TypeError)
        return bool(self._kv.delete((js_string(args[0]),)))

    def list(self, *args: Any, **kwargs: Any) -> Iterator[list[Any]]:
        """An iterator of `[key, value]` pairs, with `list`'s options."""
        pairs = self._kv.list(js_arguments(args, kwargs), where="SyncKvStorage")
        return iter([[key, value] for key, value in pairs.items()])


def _not_sync(method: str, parameter: int, kind: str) -> str:
    return (
        f"Failed to execute '{method}' on 'SyncKvStorage': parameter {parameter} is not of "
        f"type '{kind}'."
    )
