"""Where the objects of a test run: on the embedded runtime as it is, or as on Cloudflare
(each object's ctx is the Cloudflare double, in one of its two flavours).

The `host` fixture picks one for the test; every runtime the suite's harnesses build
(`make_runtime` and `runtime`, `live`, `open_lab`, the log and workflow labs) passes
`hosted()` to `Runtime`, so its objects run there through `Runtime(platform=...)`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from _cloudflare_double import BUILTIN, WORKERS_SDK, CloudflarePlatform

HOSTS = ["embedded", WORKERS_SDK, BUILTIN]

_platforms: list[CloudflarePlatform] = []


@contextmanager
def hosting(platform: CloudflarePlatform) -> Iterator[None]:
    """Host the objects of every runtime built in the block on `platform`."""
    _platforms.append(platform)
    try:
        yield
    finally:
        _platforms.remove(platform)


def hosted() -> dict[str, Any]:
    """The `Runtime` keywords that put its objects on the test's host (none: embedded)."""
    return {"platform": _platforms[-1]} if _platforms else {}
