"""`durability serve` against hostile pages and floods: cross-site requests, DNS
rebinding, oversized bodies, half-open connections and accept-error storms.

Each test runs the real command in a process and talks to it over real sockets.
"""

from __future__ import annotations

import json
import resource
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from _served import free_port
from durability.cli import main

WORKER = Path(__file__).with_name("_body_worker.py")
TEN_YEARS_MS = 10 * 365 * 86_400_000


@contextmanager
def serving(data: Path, *options: str, files: int | None = None) -> Iterator[int]:
    """`durability serve` of the body worker until the block ends (its open-file limit
    lowered to `files` if given); yields the port. Output goes to `data/serve.log`."""
    port = free_port()
    data.mkdir(parents=True, exist_ok=True)
    log = (data / "serve.log").open("wb")

    def limit() -> None:
        if files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))

    command = [
        str(Path(sys.executable).with_name("durability")),
        *("serve", str(WORKER), "--path", str(data / "objects"), "--port", str(port)),
        *options,
    ]
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, preexec_fn=limit)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    server.kill()
                    pytest.fail(f"serve did not come up: {(data / 'serve.log').read_text()}")
                time.sleep(0.05)
        yield port
    finally:
        server.send_signal(signal.SIGINT)
        try:
            assert server.wait(timeout=30) == 0, (data / "serve.log").read_text()[-3000:]
        finally:
            server.kill()
            log.close()


def exchange(port: int, request: bytes, timeout: float = 30) -> tuple[int, bytes]:
    """Send `request` (raw bytes, `Connection: close`) and read until the server closes:
    the status and the body."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65_536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def request(method: str, path: str, host: bytes, *headers: bytes, body: bytes = b"") -> bytes:
    lines = [f"{method} {path} HTTP/1.1".encode(), b"Host: " + host, b"Connection: close"]
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}".encode())
    return b"\r\n".join([*lines, *headers, b"", body])


def chunked(total: int, piece: int = 4_096) -> bytes:
    """A chunked body of `total` bytes."""
    chunks = []
    for start in range(0, total, piece):
        size = min(piece, total - start)
        chunks.append(f"{size:x}\r\n".encode() + b"x" * size + b"\r\n")
    return b"".join(chunks) + b"0\r\n\r\n"


def test_a_cross_site_request_to_durability_routes_gets_403(tmp_path: Path) -> None:
    """A page elsewhere cannot move a --virtual-time clock (Origin of another host, or
    Sec-Fetch-Site: cross-site) nor read the objects; the same origin and tools (no
    Origin) can; the worker's own routes are the worker's to judge."""
    with serving(tmp_path, "--virtual-time") as port:
        host = f"127.0.0.1:{port}".encode()
        advance = f"/_durability/advance?ms={TEN_YEARS_MS}"
        evil = b"Origin: https://evil.example"
        assert exchange(port, request("POST", advance, host, evil))[0] == 403
        cross = b"Sec-Fetch-Site: cross-site"
        assert exchange(port, request("POST", advance, host, cross))[0] == 403
        sibling = f"Origin: http://127.0.0.1:{port + 1}".encode()
        assert exchange(port, request("POST", advance, host, sibling))[0] == 403
        assert exchange(port, request("GET", "/_durability/api/objects", host, evil))[0] == 403
        assert (
            exchange(port, request("GET", "/_durability/api/objects", host, b"Origin: null"))[0]
            == 403
        )
        same = f"Origin: http://127.0.0.1:{port}".encode()
        status, body = exchange(port, request("POST", "/_durability/advance?ms=1", host, same))
        assert status == 200
        assert json.loads(body)["now_ms"] < time.time() * 1000 + 86_400_000
        assert exchange(port, request("GET", "/_durability/api/objects", host))[0] == 200
        assert exchange(port, request("POST", "/anything", host, evil))[0] == 200


def test_a_host_that_is_not_the_server_gets_403(tmp_path: Path) -> None:
    """Bound to 127.0.0.1, any request naming another host (DNS rebinding) is refused,
    worker routes too; the loopback names, with or without a port, are the server."""
    with serving(tmp_path) as port:
        for host in (b"rebind.evil.example", f"rebind.evil.example:{port}".encode(), b"10.0.0.1"):
            for path in ("/_durability/api/objects", "/"):
                assert exchange(port, request("GET", path, host))[0] == 403, (host, path)
        no_host = b"GET / HTTP/1.0\r\n\r\n"
        assert exchange(port, no_host)[0] == 403
        for host in (
            f"127.0.0.1:{port}".encode(),
            f"localhost:{port}".encode(),
            f"[::1]:{port}".encode(),
            b"LocalHost",
            b"127.0.0.1",
        ):
            assert exchange(port, request("GET", "/_durability/api/objects", host))[0] == 200, host


def test_allowed_host_names_are_let_in(tmp_path: Path) -> None:
    """`--allowed-host NAME` (repeatable) lets that name in, on any port, in any case."""
    with serving(tmp_path, "--allowed-host", "app.example", "--allowed-host", "b.example") as port:
        for host in (b"app.example", b"APP.example.:8443", b"b.example"):
            assert exchange(port, request("GET", "/", host))[0] == 200, host
        assert exchange(port, request("GET", "/", b"c.example"))[0] == 403


def test_bound_to_every_interface_ip_addresses_and_localhost_pass(tmp_path: Path) -> None:
    """Bound to 0.0.0.0, a Host that is an IP address (no DNS to rebind) or localhost
    passes, on any port (port mappings); a name still needs --allowed-host."""
    with serving(tmp_path, "--host", "0.0.0.0") as port:
        for host in (b"10.1.2.3:8080", b"[fe80::1]", b"localhost:80", f"127.0.0.1:{port}".encode()):
            assert exchange(port, request("GET", "/", host))[0] == 200, host
        assert exchange(port, request("GET", "/", b"rebind.evil.example"))[0] == 403


def test_a_body_over_the_limit_gets_413_before_it_is_read(tmp_path: Path) -> None:
    """A Content-Length over --max-body-bytes is refused before any body byte is sent;
    a chunked body is refused once it passes the limit; a body at the limit passes."""
    with serving(tmp_path, "--max-body-bytes", "1000") as port:
        host = f"127.0.0.1:{port}".encode()
        huge = b"POST / HTTP/1.1\r\nHost: " + host + b"\r\nContent-Length: 800000000\r\n\r\n"
        status, body = exchange(port, huge)
        assert status == 413
        assert b"1000" in body
        stream = b"Transfer-Encoding: chunked"
        assert exchange(port, request("POST", "/", host, stream) + chunked(1_001))[0] == 413
        status, body = exchange(port, request("POST", "/", host, stream) + chunked(1_000))
        assert (status, json.loads(body)) == (200, {"bytes": 1_000})
        status, body = exchange(port, request("POST", "/", host, body=b"y" * 1_000))
        assert (status, json.loads(body)) == (200, {"bytes": 1_000})


def test_the_default_body_limit_is_cloudflares_100_mb(tmp_path: Path) -> None:
    """Without --max-body-bytes, a body over 100,000,000 bytes gets 413 up front."""
    with serving(tmp_path) as port:
        host = f"127.0.0.1:{port}".encode()
        over = b"POST / HTTP/1.1\r\nHost: " + host + b"\r\nContent-Length: 100000001\r\n\r\n"
        assert exchange(port, over)[0] == 413


def test_serve_help_names_the_limits(capsys: pytest.CaptureFixture[str]) -> None:
    """`durability serve --help` documents the guard's options and their defaults."""
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    out = capsys.readouterr().out
    for option in ("--allowed-host", "--max-body-bytes", "--max-connections", "--header-timeout"):
        assert option in out
    assert "100000000" in out


@contextmanager
def more_files(count: int) -> Iterator[None]:
    """This test process may open `count` descriptors (as far as the hard limit allows)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = count if hard == resource.RLIM_INFINITY else min(count, hard)
    if wanted < count:
        pytest.skip(f"the hard open-file limit ({hard}) is below {count}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def half_open(port: int, count: int) -> list[socket.socket]:
    """`count` connections that start a request and never finish its headers."""
    held = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        held.append(sock)
    return held


@pytest.mark.slow
def test_half_open_connections_do_not_starve_real_requests(tmp_path: Path) -> None:
    """1,100 connections that never finish their headers, against a server with 1,024
    descriptors: real requests still get their answers, and no accept error is logged."""
    with more_files(4_096), serving(tmp_path, files=1_024) as port:
        held = half_open(port, 1_100)
        try:
            for _ in range(5):
                url = f"http://127.0.0.1:{port}/"
                with urllib.request.urlopen(url, timeout=10) as answer:
                    assert json.loads(answer.read()) == {"bytes": 0}
        finally:
            for sock in held:
                sock.close()
    assert "Too many open files" not in (tmp_path / "serve.log").read_text()


@pytest.mark.slow
def test_a_connection_that_never_finishes_its_headers_is_closed(tmp_path: Path) -> None:
    """A slow client (headers never completed) is disconnected after --header-timeout,
    whether it sent nothing or part of a request."""
    with serving(tmp_path, "--header-timeout", "0.5") as port:
        silent = socket.create_connection(("127.0.0.1", port), timeout=10)
        (trickle,) = half_open(port, 1)
        trickle.settimeout(10)
        with silent, trickle:
            assert silent.recv(1) == b""
            assert trickle.recv(1) == b""


@pytest.mark.slow
def test_an_accept_error_storm_is_logged_once_per_interval(tmp_path: Path) -> None:
    """With descriptors exhausted (64, and a connection cap above that), accept() fails
    over and over: the log says so once, not per failure; once the connections close
    the server answers again."""
    with (
        more_files(4_096),
        serving(tmp_path, "--max-connections", "1000", files=64) as port,
    ):
        held = half_open(port, 100)
        time.sleep(2)  # let accept() fail for a while
        for sock in held:
            sock.close()
        deadline = time.monotonic() + 30
        answered: Any = None
        while answered is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as answer:
                    answered = json.loads(answer.read())
            except OSError:
                time.sleep(0.2)
        assert answered == {"bytes": 0}
    log = (tmp_path / "serve.log").read_text()
    assert 1 <= log.count("accepting connections failed") <= 2, log[-3000:]
    assert "Traceback" not in log


def test_hosts_for_an_address_or_a_name_bind() -> None:
    """Bound to one address, only that address (as dialled); bound to a DNS name, only
    that name; `--allowed-host` names always; a malformed Host never."""
    from durability.cli._serve.guard import AllowedHosts

    lan = AllowedHosts("192.168.1.5", ["proxy.example"])
    assert lan.allows("192.168.1.5:8787", "192.168.1.5")
    assert lan.allows("Proxy.Example.", "192.168.1.5")
    assert not lan.allows("10.0.0.1", "192.168.1.5")
    assert not lan.allows("localhost:8787", "192.168.1.5")
    named = AllowedHosts("box.lan")
    assert named.allows("box.lan:8787", "192.168.1.5")
    assert not named.allows("other.lan", "192.168.1.5")
    for malformed in ("[::1", "localhost:80:80", "localhost:http", "", ":8787"):
        assert not AllowedHosts("127.0.0.1").allows(malformed, "127.0.0.1"), malformed


@pytest.mark.parametrize(
    ("option", "words"),
    [
        (("--max-body-bytes", "-1"), "--max-body-bytes"),
        (("--max-connections", "0"), "--max-connections"),
        (("--header-timeout", "0"), "--header-timeout"),
        (("--allowed-host", "http://app.example"), "--allowed-host"),
        (("--allowed-host", "app.example:8080"), "--allowed-host"),
    ],
)
def test_bad_limits_stop_serve_with_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: tuple[str, str], words: str
) -> None:
    """A limit that cannot work exits 2 with one line naming the option."""
    assert main(["serve", str(WORKER), "--path", str(tmp_path), *option]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err
