"""The lock that gives one Runtime its path: `flock` on `<path>/.lock`, and a set of the
paths held in this process (a second flock from the same process would succeed)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

from ._errors import PathInUseError

_held_paths: set[str] = set()


class PathLock:
    """An exclusive lock on a runtime path: `flock` on `<path>/.lock`, checked in-process too."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._real = os.path.realpath(path)
        self._file: IO[bytes] | None = None

    def acquire(self) -> None:
        """Take the lock at once, or raise `PathInUseError`."""
        import fcntl

        message = (
            f"runtime path {str(self._path)!r} is in use by another Runtime "
            "(close it first, or use another path)"
        )
        if self._real in _held_paths:
            raise PathInUseError(message)
        self._path.mkdir(parents=True, exist_ok=True)
        lock_file = open(self._path / ".lock", "ab")  # noqa: SIM115
        try:
            fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock_file.close()
            raise PathInUseError(message) from None
        self._file = lock_file
        _held_paths.add(self._real)

    def release(self) -> None:
        """Give the path up (closing the file drops the flock)."""
        if self._file is not None:
            self._file.close()
            self._file = None
            _held_paths.discard(self._real)
