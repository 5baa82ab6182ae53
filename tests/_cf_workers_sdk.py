"""`workers-runtime-sdk`'s wrappers (what pywrangler vendors) around the raw `ctx`.

Arguments are converted as its `python_to_rpc` does and results as `python_from_rpc`;
`ctx.storage` is wrapped, everything else on `ctx` stays raw.
"""

from __future__ import annotations

import datetime
import inspect
from typing import Any

from _cf_builtin_sdk import RawContext
from _cf_ffi import (
    ArrayBuffer,
    JsArray,
    JsDate,
    JsObject,
    JsProxy,
    JsTask,
    PyProxy,
    Uint8Array,
    jsnull,
)


class JsDict(dict[str, Any]):
    """The wrapping SDK's dict: keys also readable as attributes."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _from_rpc(value: Any) -> Any:
    """`python_from_rpc`: JavaScript values to Python (`None`, JsDict, memoryview)."""
    if value is jsnull:
        return None
    if isinstance(value, JsArray):
        return [_from_rpc(item) for item in value]
    if isinstance(value, JsObject):
        return JsDict({key: _from_rpc(item) for key, item in value.__dict__["_entries"].items()})
    if isinstance(value, ArrayBuffer):
        return memoryview(value.to_bytes())
    return value


def _to_rpc(value: Any) -> Any:
    """`python_to_rpc`: Python arguments to JavaScript values."""
    if value is None:
        return jsnull
    if isinstance(value, Wrapped):
        return value._target
    if isinstance(value, JsProxy):
        return value
    if isinstance(value, tuple | bytearray):
        raise TypeError(f"{type(value)} cannot be sent over RPC.")
    if inspect.isawaitable(value):
        raise TypeError(f"Awaitable {type(value)} cannot be sent over RPC.")
    if callable(value):
        return PyProxy(value)
    if isinstance(value, bytes | memoryview):
        return Uint8Array(bytes(value))
    if isinstance(value, datetime.datetime):
        return JsDate(value.timestamp() * 1000)
    if isinstance(value, dict):
        return JsObject({key: _to_rpc(item) for key, item in value.items()})
    if isinstance(value, list):
        return JsArray([_to_rpc(item) for item in value])
    return value


class Wrapped:
    """`_BindingWrapper` of `workers-runtime-sdk`: converts every argument and result."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def _result(self, value: Any) -> Any:
        converted = _from_rpc(value)
        if isinstance(converted, JsProxy) and not isinstance(converted, JsTask):
            return Wrapped(converted)
        return converted

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._target, name)
        if not callable(attribute):
            return self._result(attribute)

        def call(*args: Any) -> Any:
            result = attribute(*[_to_rpc(arg) for arg in args])
            if isinstance(result, JsTask):

                async def settled() -> Any:
                    return self._result(await result)

                return settled()
            return self._result(result)

        return call

    def __iter__(self) -> Any:
        return (self._result(item) for item in self._target)


class WorkersContext:
    """`DurableObjectContext` of `workers-runtime-sdk`: `storage` wrapped, the rest raw."""

    def __init__(self, ctx: RawContext) -> None:
        self._ctx = ctx
        self.storage = Wrapped(ctx.storage)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)
