"""The Cloudflare adapter: a Cloudflare Python Durable Object's `ctx` as a `Context`.

`adapt` is the public entry (`durability.cloudflare`); `CLOUDFLARE`, registered with
the context layer by the package (`_context.register_host`), lets the engine adapt what
helpers are given, so `context=self.ctx` works unchanged on Cloudflare and on the
embedded runtime.
"""

from __future__ import annotations

import weakref
from typing import Any

from .._context import UNHANDLED, Context
from ._context import CloudflareContext
from ._context import alarm_info as _alarm_info

__all__ = ["CLOUDFLARE", "CloudflareContext", "CloudflareHost", "adapt"]


def _is_cloudflare(ctx: object) -> bool:
    """A Cloudflare `ctx`: its storage answers to `transactionSync` but not to the
    library's `transaction_sync` (the embedded runtime's storage has both)."""
    storage = getattr(ctx, "storage", None)
    return (
        storage is not None
        and not hasattr(storage, "transaction_sync")
        and hasattr(storage, "transactionSync")
    )


_ADAPTED: weakref.WeakValueDictionary[int, CloudflareContext] = weakref.WeakValueDictionary()
"""The context adapted from each raw `ctx` still in use, by `id(ctx)` (the adapted one
holds its `ctx`, so the id names the same `ctx` as long as the entry lives)."""


def _adapted(ctx: Any) -> CloudflareContext:
    """The one adapted context of `ctx`: the helpers and the user's `adapt(self.ctx)`
    share its storage, so a `delete_all()` through either reaches the helpers."""
    adapted = _ADAPTED.get(id(ctx))
    if adapted is None:
        adapted = _ADAPTED[id(ctx)] = CloudflareContext(ctx)
    return adapted


class CloudflareHost:
    """The context layer's `HostAdapter` for Cloudflare's `ctx` and alarm info."""

    def adapt(self, ctx: Any) -> Context | None:
        if type(ctx) is CloudflareContext:
            return ctx
        return _adapted(ctx) if _is_cloudflare(ctx) else None

    def host_ctx(self, context: Any) -> Any:
        return context._ctx if type(context) is CloudflareContext else None

    def alarm_info(self, info: Any) -> Any:
        converted = _alarm_info(info)
        return UNHANDLED if converted is info else converted


CLOUDFLARE = CloudflareHost()


def adapt(ctx: Any) -> Context:
    """The library's `Context` for a Cloudflare Python Durable Object's `ctx`.

    Takes the built-in SDK's raw `ctx` or the `workers-runtime-sdk` wrapper; a context
    that already is the library's (the embedded runtime's `ctx`, or one adapted before)
    is returned as it is, so `adapt(self.ctx)` runs unchanged on both hosts.
    """
    if type(ctx) is CloudflareContext:
        return ctx
    if _is_cloudflare(ctx):
        return _adapted(ctx)
    storage = getattr(ctx, "storage", None)
    if storage is not None and hasattr(storage, "transaction_sync"):
        adapted: Context = ctx
        return adapted
    raise TypeError(
        f"ctx must be a Durable Object ctx (with storage.transactionSync), got {type(ctx).__name__}"
    )
