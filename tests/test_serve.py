"""`durability serve`: Request/Response, the ASGI app over a runtime, the real server."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from _served import free_port, start, stop
from conftest import START_MS, MakeRuntime
from durability.runtime import AlarmInvocationInfo, Request, Response, Runtime
from durability.runtime.server import WorkerApp, WorkerModule, WorkerModuleError, load_worker
from durability.testing import VirtualClock

ROOT = Path(__file__).resolve().parent.parent
COUNTER = ROOT / "examples" / "counter"


@pytest.fixture
async def counter_client(
    tmp_path: Path, make_runtime: MakeRuntime, clock: VirtualClock
) -> AsyncIterator[tuple[httpx.AsyncClient, VirtualClock]]:
    worker = load_worker(str(COUNTER))
    async with make_runtime(path=str(tmp_path), bindings=worker.bindings) as runtime:
        transport = httpx.ASGITransport(app=WorkerApp(worker, runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://demo") as client:
            yield client, clock


async def test_request_exposes_method_url_headers_and_body() -> None:
    """Request mirrors the Workers API: method, url, case-insensitive headers, a body read
    once (by text() or json())."""
    request = Request(
        "http://x/a?b=1",
        method="post",
        headers={"Content-Type": "application/json"},
        body='{"a": [1]}',
    )
    assert request.method == "POST"
    assert request.url == "http://x/a?b=1"
    assert request.headers["content-type"] == "application/json"
    assert request.headers.get("CONTENT-TYPE") == "application/json"
    assert await request.clone().text() == '{"a": [1]}'
    assert await request.json() == {"a": [1]}
    with pytest.raises(OSError, match="Body already used"):
        await request.text()


async def test_response_bodies_and_validation() -> None:
    """Response takes str/bytes bodies, Response.json sets JSON, bad input is rejected."""
    text = Response("hi", status=201)
    assert (text.status, await text.bytes(), text.headers["content-type"]) == (
        201,
        b"hi",
        "text/plain;charset=UTF-8",
    )
    data = Response.json({"a": [1, None]}, status=202)
    assert (data.status, await data.text()) == (202, '{"a": [1, null]}')
    assert data.headers["Content-Type"] == "application/json"
    assert Response(b"\x00", headers={"content-type": "x/y"}).headers["content-type"] == "x/y"
    with pytest.raises(TypeError):
        Response.json({1, 2})
    with pytest.raises(ValueError, match="status codes in the range 200 to 599"):
        Response("x", status=42)
    with pytest.raises(TypeError, match="Unsupported type in Response: int"):
        Response(123)


async def test_counter_demo_over_asgi(
    counter_client: tuple[httpx.AsyncClient, VirtualClock],
) -> None:
    """The demo counts per name, and unknown routes get the usage with 404."""
    client, _ = counter_client
    assert (await client.post("/apples/increment")).json()["value"] == 1
    assert (await client.post("/apples/increment")).json()["value"] == 2
    assert (await client.post("/pears/increment")).json()["value"] == 1
    state = (await client.get("/apples")).json()
    assert state == {"name": "apples", "value": 2, "reset_at_ms": None}
    usage = await client.get("/")
    assert usage.status_code == 200
    assert "increment" in usage.text
    assert (await client.get("/apples/nope")).status_code == 404


async def test_counter_refuses_a_bad_number_with_400(
    counter_client: tuple[httpx.AsyncClient, VirtualClock],
) -> None:
    """A reset time that is not a whole number of seconds in range gets 400, not 500."""
    client, _ = counter_client
    for bad in ("%C2%B2", "-5", "1.5", "x", "9" * 30):
        response = await client.post(f"/apples/reset-in/{bad}")
        assert response.status_code == 400, bad
        assert "SECONDS" in response.text
    assert (await client.get("/apples")).json()["reset_at_ms"] is None


async def test_counter_alarm_resets_on_the_virtual_clock(
    counter_client: tuple[httpx.AsyncClient, VirtualClock],
) -> None:
    """reset-in arms the object's alarm; it fires when the clock gets there, not before."""
    client, clock = counter_client
    await client.post("/apples/increment")
    armed = (await client.post("/apples/reset-in/30")).json()
    assert armed["reset_at_ms"] == START_MS + 30_000
    await clock.advance(29_999)
    assert (await client.get("/apples")).json()["value"] == 1
    await clock.advance(1)
    assert (await client.get("/apples")).json() == {
        "name": "apples",
        "value": 0,
        "reset_at_ms": None,
    }
    await client.post("/apples/reset-in/5")
    cancelled = (await client.post("/apples/cancel-reset")).json()
    assert cancelled["reset_at_ms"] is None


def _worker(fetch: Any) -> WorkerModule:
    return WorkerModule(name="inline", fetch=fetch, bindings={})


async def _get(app: WorkerApp, url: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        return await client.get(url)


async def test_fetch_sees_the_request_and_env(tmp_path: Path) -> None:
    """fetch gets the full URL, headers, body and the runtime's env."""
    seen: dict[str, Any] = {}

    async def fetch(request: Request, env: Any) -> Response:
        seen.update(url=request.url, method=request.method, agent=request.headers.get("x-a"))
        seen["service"] = env.SERVICE
        return Response.json(await request.json(), status=201)

    worker = WorkerModule(name="inline", fetch=fetch, bindings={"SERVICE": "fake"})
    async with Runtime(path=str(tmp_path), bindings=worker.bindings) as runtime:
        transport = httpx.ASGITransport(app=WorkerApp(worker, runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://h:9") as client:
            response = await client.post("/p/q?x=1", json={"k": 1}, headers={"X-A": "b"})
    assert (response.status_code, response.json()) == (201, {"k": 1})
    assert response.headers["content-length"] == str(len(response.content))
    assert seen == {"url": "http://h:9/p/q?x=1", "method": "POST", "agent": "b", "service": "fake"}


async def test_fetch_exception_is_a_logged_500(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An exception in fetch answers 500 with a short text and is logged with its traceback."""

    async def fetch(request: Request, env: Any) -> Response:
        raise KeyError("secret detail")

    async with Runtime(path=str(tmp_path)) as runtime:
        with caplog.at_level(logging.ERROR, logger="durability.serve"):
            response = await _get(WorkerApp(_worker(fetch), runtime), "/boom")
    assert response.status_code == 500
    assert response.text == "Internal Server Error"  # as workerd answers it
    assert "secret detail" in caplog.text
    assert "/boom" in caplog.text


async def test_fetch_must_return_a_response(tmp_path: Path) -> None:
    """A fetch that returns something else answers 500; a plain def fetch works."""
    async with Runtime(path=str(tmp_path)) as runtime:
        bad = await _get(
            WorkerApp(_worker(lambda request, env: {"not": "a response"}), runtime), "/"
        )
        good = await _get(WorkerApp(_worker(lambda request, env: Response("sync")), runtime), "/")
    assert bad.status_code == 500
    assert good.text == "sync"


async def test_lifespan_starts_and_closes_the_runtime(tmp_path: Path) -> None:
    """The ASGI lifespan starts the runtime and closes it, releasing the path."""
    worker = load_worker(str(COUNTER))
    app = WorkerApp(worker, Runtime(path=str(tmp_path), bindings=worker.bindings))
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(dict(message))

    lifespan = asyncio.create_task(app({"type": "lifespan"}, inbox.get, send))
    await inbox.put({"type": "lifespan.startup"})
    while not sent:
        await asyncio.sleep(0)
    assert sent == [{"type": "lifespan.startup.complete"}]
    assert (await _post(app, "/a/increment")).json()["value"] == 1
    await inbox.put({"type": "lifespan.shutdown"})
    await lifespan
    assert sent[-1] == {"type": "lifespan.shutdown.complete"}
    async with Runtime(path=str(tmp_path), bindings=worker.bindings) as again:
        assert await again.env.COUNTERS.get_by_name("a").state() == {
            "name": "a",
            "value": 1,
            "reset_at_ms": None,
        }


async def _post(app: WorkerApp, url: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        return await client.post(url)


def test_load_worker_by_path_and_by_dotted_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker loads from a file path or a dotted name and exposes fetch and bindings."""
    by_path = load_worker(str(COUNTER))
    assert set(by_path.bindings) == {"COUNTERS"}
    package = tmp_path / "workerpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "app.py").write_text("bindings = {'X': 1}\nasync def fetch(request, env): ...\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    by_name = load_worker("workerpkg.app")
    assert by_name.bindings == {"X": 1}
    assert by_name.name == "workerpkg.app"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("bindings = {}\n", "does not define `async def fetch"),
        ("async def fetch(request, env): ...\n", "does not define `bindings`"),
        ("bindings = [1]\nasync def fetch(request, env): ...\n", "`bindings` must be a dict.*list"),
        ("bindings = {1: 2}\nasync def fetch(request, env): ...\n", "got non-str keys"),
    ],
)
def test_load_worker_names_what_is_missing(tmp_path: Path, source: str, message: str) -> None:
    """A module without fetch or bindings, or with bindings of the wrong type, is refused."""
    module = tmp_path / "broken_worker.py"
    module.write_text(source)
    with pytest.raises(WorkerModuleError, match=message):
        load_worker(str(module))


def test_load_worker_missing_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing worker is a WorkerModuleError; a worker's own missing import propagates."""
    with pytest.raises(WorkerModuleError, match="not found"):
        load_worker("no/such/worker.py")
    with pytest.raises(WorkerModuleError, match="no worker module"):
        load_worker("no_such_worker_module_anywhere")
    (tmp_path / "needs_dep.py").write_text("import no_such_dependency_module\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency_module"):
        load_worker("needs_dep")


def _request(method: str, url: str) -> Any:
    request = urllib.request.Request(url, method=method)
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="sends SIGINT")
def test_real_server_serves_stops_on_sigint_and_keeps_data(tmp_path: Path) -> None:
    """`durability serve` answers HTTP, exits 0 on SIGINT, and a restart sees the data."""
    data = tmp_path / "data"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start(COUNTER, data, port)
    try:
        for _ in range(3):
            last = _request("POST", f"{base}/apples/increment")
        assert last["value"] == 3
        armed = _request("POST", f"{base}/apples/reset-in/3600")
    finally:
        output = stop(server)
    assert "Serving" in output
    server = start(COUNTER, data, port)
    try:
        state = _request("GET", f"{base}/apples")
    finally:
        stop(server)
    assert state == {"name": "apples", "value": 3, "reset_at_ms": armed["reset_at_ms"]}


async def test_request_and_response_mirror_workers() -> None:
    """`Request` exposes method/url/headers/text()/json(); `Response` status and json()."""
    request = Request("http://host/path", method="POST", body='{"q": 1}')
    assert (request.method, request.url) == ("POST", "http://host/path")
    assert await request.clone().text() == '{"q": 1}'
    assert await request.json() == {"q": 1}
    assert Response("hi").status == 200
    assert Response("gone", status=404).status == 404
    assert Response.json({"a": 1}).status == 200
    assert Response.json({"a": 1}, status=201).status == 201
    assert isinstance(AlarmInvocationInfo(retry_count=1, is_retry=True).retry_count, int)
