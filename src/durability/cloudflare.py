"""Cloudflare Python Workers: `adapt(ctx)` turns a Durable Object's `ctx` into a `Context`.

Helpers and `DurabilityScheduler` adapt a Cloudflare `ctx` given as `context=`
themselves, so `Durability(context=self.ctx, ...)` is the same line on Cloudflare and
on the embedded runtime. Importing this module needs neither `js` nor `pyodide`.
"""

from __future__ import annotations

from ._cloudflare import adapt

__all__ = ["adapt"]
