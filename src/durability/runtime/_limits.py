"""How many objects a runtime keeps live by default: sized from the open-file limit.

A live file-backed object holds three file descriptors (its database, WAL and shared
memory files) and about 165 KB. The default leaves a quarter of the process's
descriptor limit for everything else and caps the total at `MAX_DEFAULT_LIVE_OBJECTS`.
"""

from __future__ import annotations

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
