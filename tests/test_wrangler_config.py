"""wrangler config parity under a real `durability serve`: static assets and the ASSETS
binding, `.dev.vars`, cron triggers on virtual time and fired by hand, the warning for
keys it cannot serve, and each project's own state folder."""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from _served import free_port, start, stop

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.name != "posix", reason="stops the server with SIGINT"),
]

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def get(url: str, method: str = "GET", **headers: str) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (lower-case names) and body of one real HTTP request (no redirects)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(url, method=method, headers=headers)
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, _lower(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, _lower(error.headers), error.read()


def _lower(headers: Any) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


def digest(base: str) -> Any:
    return json.loads(get(base + "/api/digest")[2])


def copy_example(name: str, into: Path) -> Path:
    target = into / name
    shutil.copytree(EXAMPLES / name, target, ignore=shutil.ignore_patterns(".durability"))
    return target


def test_assets_are_served_before_the_worker_and_through_the_binding(tmp_path: Path) -> None:
    """Files of `assets.directory` answer first (HTML handling, ETags, HEAD); routes of
    `run_worker_first` and paths with no file reach the worker; `env.ASSETS.fetch`
    answers from the files."""
    project = copy_example("cron_digest", tmp_path)
    port = free_port()
    server = start(project, tmp_path / "data", port)
    base = f"http://127.0.0.1:{port}"
    try:
        status, headers, body = get(base + "/")
        assert (status, headers["content-type"]) == (200, "text/html; charset=utf-8")
        assert body == (project / "public" / "index.html").read_bytes()
        assert get(base + "/", **{"If-None-Match": headers["etag"]})[0] == 304
        page = (project / "public" / "index.html").read_bytes()
        status, headers, body = get(base + "/", method="HEAD")
        assert (status, body, headers["content-length"]) == (200, b"", str(len(page)))
        status, headers, _ = get(base + "/index.html?x=1")
        assert (status, headers["location"]) == (307, "/?x=1")
        about = (project / "public" / "about.txt").read_bytes()
        assert get(base + "/about.txt")[2] == about
        assert get(base + "/api/about")[2] == about
        assert get(base + "/nothing-here")[:1] == (404,)
        assert get(base + "/api/notes", method="POST")[0] == 400
        assert digest(base)["title"] == "Notes digest"
    finally:
        stop(server)


def test_dev_vars_override_vars(tmp_path: Path) -> None:
    """A `.dev.vars` beside the config overrides `vars` (as `wrangler dev` does)."""
    project = copy_example("cron_digest", tmp_path)
    (project / ".dev.vars").write_text('# local\nDIGEST_TITLE="Local digest"\nEXTRA=1\n')
    port = free_port()
    server = start(project, tmp_path / "data", port)
    try:
        assert digest(f"http://127.0.0.1:{port}")["title"] == "Local digest"
    finally:
        stop(server)


def _wait_for(base: str, check: Any) -> Any:
    """The digest once `check(digest)` holds (polling: a run commits after it returns)."""
    deadline = time.monotonic() + 30
    while not check(shown := digest(base)):
        assert time.monotonic() < deadline, shown
        time.sleep(0.05)
    return shown


def test_cron_triggers_follow_virtual_time_and_fire_by_hand(tmp_path: Path) -> None:
    """On virtual time, each quarter hour passed runs `scheduled` once, and the weekday
    morning cron (days counted from 1 = Sunday) gathers the notes at 09:00 UTC;
    `/__scheduled` (with --test-scheduled) and `/cdn-cgi/handler/scheduled` fire it by
    hand with the given cron and time."""
    project = copy_example("cron_digest", tmp_path)
    port = free_port()
    server = start(project, tmp_path / "data", port, "--virtual-time", "--test-scheduled")
    base = f"http://127.0.0.1:{port}"
    try:
        assert get(base + "/api/notes", method="POST")[0] == 400
        note = json.dumps({"text": "one"}).encode()
        request = urllib.request.Request(base + "/api/notes", data=note, method="POST")
        urllib.request.urlopen(request, timeout=30).close()
        now = json.loads(_advance(base, 0))["now_ms"]
        _advance(base, 15 * 60_000)
        assert _wait_for(base, lambda d: d["ticks"] >= 1)["ticks"] == 1
        morning = _next_weekday_morning(now + 15 * 60_000)
        _advance(base, morning - (now + 15 * 60_000))
        shown = _wait_for(base, lambda d: d["digests"])
        assert shown["digests"] == [{"at": morning, "notes": ["one"]}]
        assert shown["pending"] == []
        status, _, body = get(base + "/__scheduled?cron=0+9+*+*+2-6&time=1000")
        assert (status, body) == (200, b"Ran scheduled event")
        assert get(base + "/cdn-cgi/handler/scheduled?cron=*/15+*+*+*+*")[0] == 200
        assert digest(base)["digests"][0]["at"] == 1000
    finally:
        stop(server)


def _advance(base: str, ms: int) -> bytes:
    request = urllib.request.Request(f"{base}/_durability/advance?ms={ms}", method="POST")
    with urllib.request.urlopen(request, timeout=60) as response:
        body: bytes = response.read()
        return body


def _next_weekday_morning(after_ms: int) -> int:
    """The first Monday-to-Friday 09:00 UTC strictly after `after_ms`."""
    day = datetime.fromtimestamp(after_ms / 1000, UTC).replace(
        hour=9, minute=0, second=0, microsecond=0
    )
    while day.timestamp() * 1000 <= after_ms or day.weekday() >= 5:
        day += timedelta(days=1)
    return int(day.timestamp() * 1000)


def test_keys_it_cannot_serve_are_named_once_at_start(tmp_path: Path) -> None:
    """Cloudflare bindings it lacks and unknown keys are named in one warning line;
    keys that only shape a deployment are not."""
    project = copy_example("counter", tmp_path)
    config = {
        "name": "counter-copy",
        "main": "src/entry.py",
        "durable_objects": {"bindings": [{"name": "COUNTERS", "class_name": "Counter"}]},
        "kv_namespaces": [{"binding": "CACHE", "id": "x"}],
        "observability": {"enabled": True},
        "colour": "blue",
    }
    (project / "wrangler.jsonc").write_text(json.dumps(config))
    port = free_port()
    server = start(project, tmp_path / "data", port)
    output = stop(server)
    lines = [line for line in output.splitlines() if "not served here" in line]
    assert lines == [
        "WARNING   wrangler.jsonc: not served here: kv_namespaces, colour (unknown key)"
    ]


def test_each_project_keeps_its_state_in_its_own_folder(tmp_path: Path) -> None:
    """Without --path, two projects with the same binding names keep separate objects,
    each under its own `.durability` (kept out of git); a worker module keeps using
    `.durability` in the current directory."""
    first, second = copy_example("counter", tmp_path / "a"), copy_example("counter", tmp_path / "b")
    for project, increments in ((first, 2), (second, 1)):
        port = free_port()
        server = start(project, None, port)
        try:
            for _ in range(increments):
                get(f"http://127.0.0.1:{port}/apples/increment", method="POST")
            value = json.loads(get(f"http://127.0.0.1:{port}/apples")[2])["value"]
        finally:
            stop(server)
        assert value == increments
        state = project / ".durability"
        assert (state / "COUNTERS").is_dir()
        assert (state / ".gitignore").read_text().splitlines()[-1] == "*"
