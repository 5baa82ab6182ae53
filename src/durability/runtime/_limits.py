"""How many objects a runtime keeps live, and which ones to evict past that.

A live file-backed object holds three file descriptors (its database, WAL and shared
memory files) and about 165 KB. The default cap leaves a quarter of the process's
descriptor limit for everything else and is at most `MAX_DEFAULT_LIVE_OBJECTS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sized
from typing import Protocol, TypeVar

K = TypeVar("K")


class _Live(Protocol):
    """A live instance as far as eviction cares: the work it has running."""

    @property
    def tasks(self) -> Sized: ...


FDS_PER_OBJECT = 3
MIN_DEFAULT_LIVE_OBJECTS = 16
MAX_DEFAULT_LIVE_OBJECTS = 2_000
_UNLIMITED_FDS = 1 << 20


def default_max_live_objects() -> int:
    """The cap on live objects when `Runtime(max_live_objects=None)`."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        unlimited = resource.RLIM_INFINITY
    except (ImportError, OSError, ValueError):
        return 1_000
    fds = _UNLIMITED_FDS if soft == unlimited or soft <= 0 else soft
    usable = fds * 3 // 4 // FDS_PER_OBJECT
    return max(MIN_DEFAULT_LIVE_OBJECTS, min(MAX_DEFAULT_LIVE_OBJECTS, usable))


def least_recent_idle(instances: Mapping[K, _Live], cap: int, keep: K) -> list[K]:
    """The keys to evict to get `instances` (least recently used first) down to `cap`.

    Only idle ones (no call, alarm or `wait_until` work) and never `keep` (the one just
    built): while more than `cap` objects are busy, the cap is exceeded.
    """
    excess = len(instances) - cap
    victims: list[K] = []
    for key, instance in instances.items():
        if len(victims) >= excess:
            break
        if key != keep and not len(instance.tasks):
            victims.append(key)
    return victims
