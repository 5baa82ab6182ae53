"""Telling a failed open that ran out of file descriptors from one that would fail anyway.

`open()` says so itself (`EMFILE` for the process, `ENFILE` for the system), but SQLite
only says "unable to open database file" whatever the cause, so after a SQLite error
the process tries to open as many descriptors as an object file needs.
"""

from __future__ import annotations

import errno
import os
import sqlite3

from ._limits import FDS_PER_OBJECT

_EXHAUSTED = (errno.EMFILE, errno.ENFILE)


def out_of_descriptors(error: BaseException) -> bool:
    """Whether `error` (or what caused it) comes from running out of file descriptors."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno in _EXHAUSTED:
            return True
        cause = cause.__cause__
    return isinstance(error, sqlite3.Error) and not _can_open(FDS_PER_OBJECT)


def _can_open(count: int) -> bool:
    """Whether `count` more descriptors can be opened now (they are closed again)."""
    opened: list[int] = []
    try:
        for _ in range(count):
            opened.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
    except OSError as error:
        if error.errno in _EXHAUSTED:
            return False
        raise
    finally:
        for descriptor in opened:
            os.close(descriptor)
    return True
