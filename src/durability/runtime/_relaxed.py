"""Calling a Worker's handlers as workerd does: the arguments a handler has no parameter
for are dropped.

workerd calls a Python handler (`fetch`, `scheduled`, `webSocketMessage`, ...) with all
the arguments of its event, and a handler that declares fewer gets the first ones only:
`async def fetch(self)` serves requests, `async def webSocketClose(self, ws)` gets the
socket alone (measured on a local workerd with both Python SDKs). RPC methods are not
handlers: a call with too many arguments raises `TypeError` there, as it does here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["call_relaxed"]

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def call_relaxed(handler: Callable[..., Any], *args: object) -> Any:
    """`handler(*args)` with the arguments beyond its positional parameters dropped."""
    try:
        parameters = inspect.signature(handler).parameters.values()
    except (TypeError, ValueError):
        return handler(*args)
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return handler(*args)
    takes = sum(p.kind in _POSITIONAL for p in parameters)
    return handler(*args[:takes])
