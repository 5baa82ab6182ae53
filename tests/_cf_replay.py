"""Replaying a Cloudflare-shaped test project's requests, and comparing the answers.

Each project under `tests/cf_projects/` has `requests.json`: a list of steps, each a
request (`{"path", "method", "headers", "body"}`, headers as an object or a list of
pairs), `{"restart": true}` (stop the host and start it again on the same storage) or
`{"sleep_ms": N}` (let time pass). `expected.json` holds the answers a real workerd gave
to its requests, in order (recorded by `scripts/cf-diff --record`).
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

PROJECTS = Path(__file__).resolve().parent / "cf_projects"

IGNORED_HEADERS = frozenset(
    {"connection", "content-length", "date", "keep-alive", "server", "transfer-encoding"}
)
"""Headers that say how a host sent the answer, not what the worker answered."""

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
    """An answer as compared: status, the headers that matter (sorted), body text."""
    return {
        "name": step.get("name", f"{step.get('method', 'GET')} {step['path']}"),
        "status": status,
        "headers": sorted(
            [name.lower(), value] for name, value in headers if name.lower() not in IGNORED_HEADERS
        ),
        "body": body.decode("utf-8", "backslashreplace"),
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
    for step in steps(project):
        if step.get("restart"):
            restart()
        elif "sleep_ms" in step:
            time.sleep(step["sleep_ms"] / 1000)
        else:
            want = next(answers)
            if step.get("only", sdk) == sdk:
                got = ask(base_url(), step)
                problems += [f"{want['name']}: {line}" for line in differences(want, got)]
    return problems
