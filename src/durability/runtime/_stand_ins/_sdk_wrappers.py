"""The wrappers `workers-runtime-sdk` puts around what its classes are built with:
`DurableObjectContext` (a Durable Object's `ctx`) and `_EnvWrapper` (every `env`).

On Cloudflare the SDK wraps the JavaScript `ctx` and `env` before the user's `__init__`
sees them, once however deep the class hierarchy, and code may check for it
(`isinstance(self.ctx, DurableObjectContext)`) or import the names from
`workers.entrypoints` / `workers.rpc`. Here the wrapped values are the runtime's own, and
each wrapper hands every attribute on to the value it wraps.
"""

from __future__ import annotations

import functools
from typing import Any, Self


class _Wrapper:
    """Wraps one value; wrapping a wrapper of the same class gives that wrapper back."""

    def __new__(cls, wrapped: Any) -> Self:
        if isinstance(wrapped, cls):
            return wrapped
        return super().__new__(cls)

    def __init__(self, wrapped: Any) -> None:
        if wrapped is self:
            return
        self._wrapped = wrapped

    def __getattr__(self, name: str) -> Any:
        if name == "_wrapped":
            raise AttributeError(name)
        return getattr(self._wrapped, name)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self._wrapped)) | set(super().__dir__()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._wrapped!r})"


class DurableObjectContext(_Wrapper):
    """A Durable Object's `ctx` as the SDK hands it over: `_ctx` is the wrapped one."""

    @property
    def _ctx(self) -> Any:
        return self._wrapped


class _EnvWrapper(_Wrapper):
    """An `env` as the SDK hands it over: `_env` is the wrapped one."""

    @property
    def _env(self) -> Any:
        return self._wrapped


def wrap_init(cls: type, *, durable_object: bool) -> None:
    """Have `cls.__init__` (if the class defines one) get `ctx` and `env` wrapped, as the
    SDK has each subclass's: wrapping twice gives the same wrapper, so a hierarchy of
    several levels still wraps once."""
    original = cls.__dict__.get("__init__")
    if original is None or getattr(original, "_durability_wraps_ctx", False):
        return

    @functools.wraps(original)
    def wrapped_init(self: Any, *args: Any, **kwargs: Any) -> None:
        if args and durable_object:
            args = (DurableObjectContext(args[0]), *args[1:])
        if len(args) > 1:
            args = (args[0], _EnvWrapper(args[1]), *args[2:])
        original(self, *args, **kwargs)

    wrapped_init._durability_wraps_ctx = True  # type: ignore[attr-defined]
    type.__setattr__(cls, "__init__", wrapped_init)
