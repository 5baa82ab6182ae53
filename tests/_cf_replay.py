"""Replaying a Cloudflare-shaped test project's requests, and comparing the answers.

Each project under `tests/cf_projects/` has `requests.json`: a list of steps, each one of
- an HTTP request: `{"path", "method", "headers", "body"}`, headers as an object or a
  list of pairs;
- a WebSocket action on a connection named by the step (connections stay open from step
  to step): `{"open": NAME, "path", "headers"}` (the handshake: 101 and its headers, or
  the HTTP answer that refused it), `{"send": NAME, "text": T}` or `{"send": NAME,
  "bytes": HEX}`, `{"receive": NAME, "count": N}` (the next N frames), `{"close": NAME,
  "code": C, "reason": R}` (the frames until the host's close frame), `{"drop": NAME}`
  (the TCP connection lost, without a close frame); `receive` and `close` wait up to
  10 s for each frame, or `"wait_ms"`;
- `{"restart": true}` (stop the host and start it again on the same storage; open
  connections are dropped) or `{"sleep_ms": N}` (let time pass).
Any step may say `"only": "runtime"` or `"builtin"` (the one SDK flavour it is asked
with) and `"mask": [REGEX, ...]` (matches in the body are replaced by `<masked>` on
both hosts: times, random ids). `send` and `drop` have no answer; `expected.json`
holds the answers a real workerd gave to the other steps, in order (recorded by
`scripts/cf-diff --record`).
"""

from __future__ import annotations

import http.client
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from _cf_sockets import RECEIVE_TIMEOUT_S, Client, Frame, Refused

PROJECTS = Path(__file__).resolve().parent / "cf_projects"

IGNORED_HEADERS = frozenset(
    {"connection", "content-length", "date", "keep-alive", "server", "transfer-encoding"}
)
"""Headers that say how a host sent the answer, not what the worker answered."""

HANDSHAKE_HEADERS = frozenset(
    {"upgrade", "sec-websocket-accept", "sec-websocket-extensions", "sec-websocket-version"}
)
"""Headers of a 101 answer that the host's WebSocket server writes, not the worker."""

SOCKET_ACTIONS = ("open", "send", "receive", "close", "drop")

Answer = dict[str, Any]


def project_names() -> list[str]:
    """The test projects, by folder name."""
    return sorted(path.parent.name for path in PROJECTS.glob("*/requests.json"))


def steps(project: Path) -> list[dict[str, Any]]:
    """The project's steps, from its `requests.json`."""
    loaded: list[dict[str, Any]] = json.loads((project / "requests.json").read_text())
    return loaded


def expected(project: Path) -> list[Answer] | None:
    """The recorded answers, or `None` before they were recorded."""
    path = project / "expected.json"
    if not path.is_file():
        return None
    answers: list[Answer] = json.loads(path.read_text())
    return answers


def has_answer(step: dict[str, Any]) -> bool:
    """Whether the step gets an answer (a request, or a WebSocket open/receive/close)."""
    return not (step.get("restart") or "sleep_ms" in step or "send" in step or "drop" in step)


class Replayer:
    """Sends a project's steps to one host (at `base_url()`), keeping its WebSocket
    connections open from step to step."""

    def __init__(self, base_url: Callable[[], str]) -> None:
        self.base_url = base_url
        self.sockets: dict[str, Client] = {}

    def step(self, step: dict[str, Any]) -> Answer | None:
        """Send one request or WebSocket step; its answer, or `None` for `send`/`drop`."""
        action = next((key for key in SOCKET_ACTIONS if key in step), None)
        if action is None:
            return ask(self.base_url(), step)
        name = step[action]
        label = step.get(
            "name", f"{action} {name}" + (f" {step['path']}" if "path" in step else "")
        )
        if action == "open":
            return self._open(name, label, step)
        client = self.sockets[name]
        if action == "send":
            client.send(step["text"] if "text" in step else bytes.fromhex(step["bytes"]))
            return None
        if action == "drop":
            client.close_socket()
            del self.sockets[name]
            return None
        wait_s = step.get("wait_ms", RECEIVE_TIMEOUT_S * 1000) / 1000
        if action == "receive":
            frames = client.receive(step["count"], wait_s)
        else:
            frames = client.close(step.get("code", 1000), step.get("reason", ""), wait_s)
            del self.sockets[name]
        masked = [_masked(frame, step.get("mask", [])) for frame in frames]
        body = json.dumps(masked, ensure_ascii=False).encode("utf-8")
        return answer({"name": label}, 0, [], body)

    def _open(self, name: str, label: str, step: dict[str, Any]) -> Answer:
        client = Client(self.base_url(), step["path"], header_pairs(step))
        labelled = {**step, "name": label}
        try:
            client.connect()
        except Refused as refused:
            return answer(labelled, refused.status, refused.headers, refused.body)
        self.sockets[name] = client
        kept = [(k, v) for k, v in client.headers if k.lower() not in HANDSHAKE_HEADERS]
        return answer(labelled, client.status, kept, b"")

    def drop_all(self) -> None:
        """Drop every open connection (before the host restarts)."""
        for client in self.sockets.values():
            client.close_socket()
        self.sockets.clear()


def _masked(frame: Frame, patterns: list[str]) -> Frame:
    """A received frame with the patterns in its text replaced by `<masked>`."""
    if isinstance(frame, dict) and "text" in frame:
        text = frame["text"]
        for pattern in patterns:
            text = re.sub(pattern, "<masked>", text)
        return {"text": text}
    return frame


def ask(base_url: str, step: dict[str, Any]) -> Answer:
    """Send one request step to `base_url` over HTTP; the answer, as compared."""
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    pairs = header_pairs(step)
    body = step.get("body")
    try:
        connection.putrequest(step.get("method", "GET"), step["path"])
        for name, value in pairs:
            connection.putheader(name, value)
        data = body.encode("utf-8") if body is not None else b""
        if body is not None or step.get("method", "GET") not in ("GET", "HEAD"):
            connection.putheader("Content-Length", str(len(data)))
        connection.endheaders(data or None)
        response = connection.getresponse()
        return answer(step, response.status, response.getheaders(), response.read())
    finally:
        connection.close()


def header_pairs(step: dict[str, Any]) -> list[tuple[str, str]]:
    """The step's request headers as (name, value) pairs."""
    headers = step.get("headers", {})
    return list(headers.items()) if isinstance(headers, dict) else [tuple(h) for h in headers]


def answer(
    step: dict[str, Any], status: int, headers: list[tuple[str, str]], body: bytes
) -> Answer:
    """An answer as compared: status, the headers that matter (sorted), body text (with
    the step's `mask` patterns replaced)."""
    text = body.decode("utf-8", "backslashreplace")
    for pattern in step.get("mask", []):
        text = re.sub(pattern, "<masked>", text)
    return {
        "name": step["name"] if "name" in step else f"{step.get('method', 'GET')} {step['path']}",
        "status": status,
        "headers": sorted(
            [name.lower(), value] for name, value in headers if name.lower() not in IGNORED_HEADERS
        ),
        "body": text,
    }


def differences(want: Answer, got: Answer) -> list[str]:
    """How `got` differs from `want` (status, headers, body), one line each; bodies that
    are JSON lists of the same length are compared item by item."""
    found = []
    for part in ("status", "headers", "body"):
        if want[part] != got[part]:
            items = _json_lists(want[part], got[part]) if part == "body" else None
            if items is None:
                found.append(f"{part}: expected {want[part]!r}, got {got[part]!r}")
                continue
            found.extend(
                f"body[{index}]: expected {expected!r}, got {actual!r}"
                for index, (expected, actual) in enumerate(zip(*items, strict=True))
                if expected != actual
            )
    return found


def _json_lists(want: str, got: str) -> tuple[list[Any], list[Any]] | None:
    try:
        parsed = json.loads(want), json.loads(got)
    except ValueError:
        return None
    if not all(isinstance(body, list) for body in parsed) or len(parsed[0]) != len(parsed[1]):
        return None
    return parsed


def replay_recording(
    project: Path, sdk: str, base_url: Callable[[], str], restart: Callable[[], None]
) -> list[str]:
    """Replay the project's steps against a running host (`base_url()` gives its URL,
    `restart()` restarts it) and compare each answer with the recorded one; steps marked
    `"only"` for another SDK are skipped. The differences, one line each."""
    recorded = expected(project)
    if recorded is None:
        return [f"{project.name} has no expected.json: run scripts/cf-diff --record"]
    answers = iter(recorded)
    problems: list[str] = []
    replayer = Replayer(base_url)
    try:
        for step in steps(project):
            if step.get("restart"):
                replayer.drop_all()
                restart()
            elif "sleep_ms" in step:
                time.sleep(step["sleep_ms"] / 1000)
            else:
                want = next(answers) if has_answer(step) else None
                if step.get("only", sdk) == sdk:
                    got = replayer.step(step)
                    if want is not None and got is not None:
                        problems += [f"{want['name']}: {line}" for line in differences(want, got)]
    finally:
        replayer.drop_all()
    return problems
