"""Run `durability serve` as a real process on a free loopback port, for HTTP tests."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start(
    target: str | Path, data: Path | None, port: int, *options: str
) -> subprocess.Popen[bytes]:
    """Start `durability serve target` on `port` (with `--path data` unless `data` is
    `None`); returns once it answers HTTP (30 s at most)."""
    path = [] if data is None else ["--path", str(data)]
    command = [
        str(Path(sys.executable).with_name("durability")),
        "serve",
        str(target),
        *path,
        "--port",
        str(port),
        *options,
    ]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while True:
        try:
            ready = f"http://127.0.0.1:{port}/_durability/api/objects"
            urllib.request.urlopen(ready, timeout=1).close()
            return server
        except (urllib.error.URLError, ConnectionError):
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                output = server.communicate()[0].decode()
                pytest.fail(f"durability serve {target} did not come up:\n{output}")
            time.sleep(0.05)


def stop(server: subprocess.Popen[bytes]) -> str:
    """Stop `server` with SIGINT; it must exit 0 within 30 s. Returns its output."""
    server.send_signal(signal.SIGINT)
    try:
        output = server.communicate(timeout=30)[0].decode()
    except subprocess.TimeoutExpired:
        server.kill()
        raise
    assert server.returncode == 0, output
    return output


@contextmanager
def served(target: str | Path, data: Path, *options: str) -> Iterator[str]:
    """Serve `target` from `data` until the block ends; yields the base URL."""
    port = free_port()
    server = start(target, data, port, *options)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(server)


def call(method: str, url: str) -> tuple[int, Any]:
    """`method url` over real HTTP: the status and the JSON body."""
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())
