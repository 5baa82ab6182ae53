"""What objects see of their host: the `ctx` each is built with and the info its
`alarm()` gets.

The embedded runtime hands objects its own `ObjectContext` and an
`AlarmInvocationInfo`. A `Runtime` given another `Platform` hands them what it builds
instead, over the same runtime: how the tests host objects as Cloudflare would (a `ctx`
in Cloudflare's shape over the runtime's, Cloudflare's alarm info).
"""

from __future__ import annotations

from typing import Any, Protocol

from ._object import AlarmInvocationInfo, ObjectContext


class Platform(Protocol):
    """Builds what an object sees of its host."""

    def context(self, ctx: ObjectContext) -> Any:
        """The `ctx` an object is constructed with, given the runtime's own."""
        ...

    def alarm_info(self, retry_count: int, is_retry: bool) -> Any:
        """What `alarm(info)` receives for a delivery with this retry count."""
        ...


class Embedded:
    """The embedded runtime's own platform: its `ctx` and `AlarmInvocationInfo`."""

    def context(self, ctx: ObjectContext) -> ObjectContext:
        return ctx

    def alarm_info(self, retry_count: int, is_retry: bool) -> AlarmInvocationInfo:
        return AlarmInvocationInfo(retry_count=retry_count, is_retry=is_retry)


EMBEDDED = Embedded()
