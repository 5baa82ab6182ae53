"""Why `durability serve` cannot start, each said in one line instead of a traceback.

A worker module that fails to import is reported at the user's own frame (the last
one outside this package and the Python installation); the path and the port are
tried before the server starts, so a path another runtime holds or a port in use is
named as such.
"""

from __future__ import annotations

import errno
import os
import socket
import sysconfig
import traceback
from pathlib import Path

from ...runtime._errors import PathInUseError
from ...runtime._path_lock import PathLock

_PACKAGE = str(Path(__file__).resolve().parents[2])
_INSTALLED = tuple(
    str(Path(sysconfig.get_path(key)).resolve()) for key in ("stdlib", "purelib", "platlib")
)


def import_failure(target: str, error: BaseException) -> str:
    """`importing TARGET failed at FILE:LINE: Error: message`, at the user's frame."""
    summary = f"{type(error).__name__}: {error}"
    if isinstance(error, SyntaxError) and error.filename:
        where = f"{_shown(error.filename)}:{error.lineno}"
        summary = f"{type(error).__name__}: {error.msg}"
    else:
        frames = traceback.extract_tb(error.__traceback__)
        own = [frame for frame in frames if _is_users(frame.filename)] or frames
        if not own:
            return f"importing {target} failed: {summary}"
        where = f"{_shown(own[-1].filename)}:{own[-1].lineno}"
    return f"importing {target} failed at {where}: {summary}"


def path_problem(path: Path) -> str | None:
    """Why `path` cannot hold the objects' files, or `None` if it can."""
    if path.exists() and not path.is_dir():
        return f"--path {path} is not a directory"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return f"--path {path} cannot be created: {error.strerror}"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"--path {path} is not writable"
    lock = PathLock(path)
    try:
        lock.acquire()
    except PathInUseError as error:
        return str(error)
    except OSError as error:
        return f"--path {path}: {error.strerror}"
    lock.release()
    return None


def ignore_state(path: Path) -> None:
    """Keep a project's state folder out of git (a `.gitignore` of `*` in it)."""
    marker = path / ".gitignore"
    if not marker.exists():
        marker.write_text("# durability serve's local state: objects, alarms, migrations\n*\n")


def port_problem(host: str, port: int) -> str | None:
    """Why the server cannot listen on `host:port`, or `None` if it can."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as error:
        return f"--host {host}: {error.strerror}"
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                return f"port {port} on {host} is in use (stop what holds it, or use --port)"
            return f"cannot listen on {host}:{port}: {error.strerror}"
    return None


def _is_users(filename: str) -> bool:
    if filename.startswith("<"):
        return False
    resolved = str(Path(filename).resolve())
    return not resolved.startswith(_PACKAGE) and not resolved.startswith(_INSTALLED)


def _shown(filename: str) -> str:
    """`filename` relative to the working directory when it is under it."""
    try:
        return str(Path(filename).resolve().relative_to(Path.cwd()))
    except ValueError:
        return filename
