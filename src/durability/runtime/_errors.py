"""Errors raised by the embedded runtime itself (not by the objects it hosts)."""

from __future__ import annotations

from .._errors import DurabilityError


class ObjectEvictedError(DurabilityError):
    """The object instance was evicted or crashed: its `ctx` is fenced, its calls cut off.

    Raised by any storage call made through an evicted instance's `ctx` (so a zombie
    handler cannot write after a new instance took over), and to the caller of a call
    that the eviction interrupted.
    """


class PathInUseError(DurabilityError):
    """Another `Runtime` (in this process or another) already holds the storage path."""


class DurableObjectAbort(BaseException):
    """Raised inside an object by `ctx.abort(reason)`, as Cloudflare's SDK raises it.

    A `BaseException`, so `except Exception` in the object's code does not stop it: the
    object is reset (its writes not yet committed are dropped, the next call builds a
    new instance) and the caller gets Cloudflare's error.
    """
