"""Each example project served by `durability serve examples/<name>`, checked over HTTP.

The checks live in `_example_checks` so that `scripts/workerd-smoke` runs the very same
ones against the projects on workerd.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from _example_checks import CHECKS

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _start(project: Path, data: Path, port: int) -> subprocess.Popen[bytes]:
    command = [
        str(Path(sys.executable).with_name("durability")),
        "serve",
        str(project),
        "--path",
        str(data),
        "--port",
        str(port),
    ]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).close()
            return server
        except urllib.error.HTTPError:
            return server  # It answered (a 404 is still an answer).
        except (urllib.error.URLError, ConnectionError):
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                output = server.communicate()[0].decode()
                pytest.fail(f"durability serve {project.name} did not come up:\n{output}")
            time.sleep(0.05)


@pytest.mark.skipif(os.name != "posix", reason="stops the server with SIGINT")
@pytest.mark.parametrize("name", sorted(CHECKS))
def test_example_answers_over_http(name: str, tmp_path: Path) -> None:
    """`durability serve examples/<name>` serves the project; its HTTP checks pass."""
    port = _free_port()
    server = _start(EXAMPLES / name, tmp_path / "data", port)
    try:
        CHECKS[name](f"http://127.0.0.1:{port}")
    finally:
        server.send_signal(signal.SIGINT)
        output = server.communicate(timeout=30)[0].decode()
    assert server.returncode == 0, output
