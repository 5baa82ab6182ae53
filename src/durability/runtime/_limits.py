"""How many objects a runtime keeps live and how many files open, and whom to evict.

A live object costs a few KiB of Python memory; its open SQLite file costs about
150 KiB and four file descriptors (database, WAL and shared memory, and the runtime's
own of the WAL, which it syncs after each commit). So the two are
capped apart: live objects by a fixed default, open files by the process's descriptor
limit (a quarter of it left for everything else), at most `MAX_DEFAULT_OPEN_DATABASES`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sized
from typing import Protocol, TypeVar

K = TypeVar("K")


class _Live(Protocol):
    """A live instance as far as eviction cares: the work it has running."""

    @property
    def tasks(self) -> Sized: ...


DEFAULT_MAX_LIVE_OBJECTS = 10_000
FDS_PER_OBJECT = 4
MIN_DEFAULT_OPEN_DATABASES = 16
MAX_DEFAULT_OPEN_DATABASES = 1_000
_UNLIMITED_FDS = 1 << 20


def default_max_open_databases() -> int:
    """The cap on open object files when `Runtime(max_open_databases=None)`."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        unlimited = resource.RLIM_INFINITY
    except (ImportError, OSError, ValueError):
        return 256
    fds = _UNLIMITED_FDS if soft == unlimited or soft <= 0 else soft
    usable = fds * 3 // 4 // FDS_PER_OBJECT
    return max(MIN_DEFAULT_OPEN_DATABASES, min(MAX_DEFAULT_OPEN_DATABASES, usable))


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
