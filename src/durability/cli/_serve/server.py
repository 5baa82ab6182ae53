"""The ASGI app behind `durability serve`: a worker's `fetch` over HTTP.

The worker is either a Cloudflare-shaped project folder (`wrangler.jsonc` or
`wrangler.toml`, see `project`) or a worker module that defines its `DurableObject`
classes, a `bindings` dict and `async def fetch(request, env)`. `WorkerApp`
turns each HTTP request into a `Request`, calls `fetch(request, runtime.env)` and sends
back the `Response`, except under `/_durability`, where the read-only dashboard
answers; its ASGI lifespan starts and closes the runtime, so a server shutdown
(Ctrl-C) closes every object and releases the path's lock.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...runtime import Runtime
from ...runtime._http import FetchResponse, Request, Response
from ...runtime._workers import ExecutionContext, serve_worker
from .._dashboard import Dashboard
from .project import Project, ProjectError, find_config, load_project
from .ws_asgi import serve_websocket

__all__ = ["WorkerApp", "WorkerModule", "WorkerModuleError", "load_worker"]

logger = logging.getLogger("durability.serve")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class WorkerModuleError(Exception):
    """A worker module cannot be imported or lacks `fetch`/`bindings`."""


@dataclass(frozen=True)
class WorkerModule:
    """What `durability serve` needs from a worker module."""

    name: str
    fetch: Callable[[Request, Any], Any]
    bindings: dict[str, Any]
    settle: Callable[[], Awaitable[None]] | None = None
    """Run at server shutdown, before the runtime closes (a project's `waitUntil` work)."""
    start: Callable[[Any], Awaitable[None]] | None = None
    """Run with the runtime's `env` once it started (a project's cron triggers)."""
    project: Project | None = None
    """The project folder's config, when the worker is one (its state folder, warnings,
    migrations)."""
    context: ExecutionContext | None = None
    """The worker's `ctx` (a project's), which `workers.wait_until` reaches."""


def load_worker(target: str, *, test_scheduled: bool = False) -> WorkerModule:
    """Load a project folder (`examples/counter`), or import a worker module by file path
    or dotted name. `test_scheduled` lets a project answer `GET /__scheduled`.

    Raises `WorkerModuleError` naming what is missing: the folder's config, the module,
    its `async def fetch(request, env)` (or `Default` entry point), or its `bindings`.
    """
    folder = Path(target)
    if folder.is_dir() and find_config(folder) is not None:
        try:
            project = load_project(folder, test_scheduled=test_scheduled)
        except ProjectError as error:
            raise WorkerModuleError(str(error)) from None
        return WorkerModule(
            name=project.module.__name__ if project.module is not None else folder.name,
            fetch=project.fetch,
            bindings=project.bindings,
            settle=project.settle,
            start=project.start,
            project=project,
            context=project.context,
        )
    if folder.is_dir():
        raise WorkerModuleError(f"{target} is a folder without wrangler.jsonc or wrangler.toml")
    module = _import(target)
    fetch = getattr(module, "fetch", None)
    if fetch is None or not callable(fetch):
        raise WorkerModuleError(f"{target} does not define `async def fetch(request, env)`")
    bindings = getattr(module, "bindings", None)
    what = "a dict of binding names (str) to DurableObject classes or values"
    if bindings is None:
        raise WorkerModuleError(f"{target} does not define `bindings`, {what}")
    if not isinstance(bindings, dict) or not all(isinstance(k, str) for k in bindings):
        kind = type(bindings).__name__ if not isinstance(bindings, dict) else "non-str keys"
        raise WorkerModuleError(f"{target}: `bindings` must be {what}, got {kind}")
    return WorkerModule(name=module.__name__, fetch=fetch, bindings=bindings)


def _import(target: str) -> Any:
    path = Path(target)
    if target.endswith(".py") or path.is_file():
        if not path.is_file():
            raise WorkerModuleError(f"worker module file not found: {target}")
        resolved = path.resolve()
        name = resolved.stem if resolved.stem not in sys.modules else f"_worker_{resolved.stem}"
        spec = importlib.util.spec_from_file_location(name, resolved)
        if spec is None or spec.loader is None:
            raise WorkerModuleError(f"cannot import {target} as a Python module")
        module = importlib.util.module_from_spec(spec)
        if str(resolved.parent) not in sys.path:
            sys.path.insert(0, str(resolved.parent))
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        return module
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if target == missing or target.startswith(f"{missing}."):
            raise WorkerModuleError(f"no worker module named {target!r}") from None
        raise


class WorkerApp:
    """ASGI app serving `worker.fetch` against `runtime`.

    The lifespan protocol starts the runtime at server start and closes it at shutdown.
    Driven without a lifespan (e.g. by httpx's `ASGITransport` in tests), the caller
    starts and closes the runtime itself. Paths under `/_durability` are the
    dashboard's (see `durability.cli._dashboard`).
    """

    def __init__(self, worker: WorkerModule, runtime: Runtime) -> None:
        self.worker = worker
        self.runtime = runtime
        self.dashboard = Dashboard(runtime.path, runtime.clock)
        serve_worker(runtime.env, worker.context or ExecutionContext())
        self.closed = False
        """True once `stop()` settled the worker and closed the runtime cleanly."""
        self._stopped = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            await serve_websocket(scope, receive, send, _url(scope), self._call_worker)
        else:
            raise RuntimeError(f"unsupported ASGI scope type {scope['type']!r}")

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.runtime.start()
                    if self.worker.start is not None:
                        await self.worker.start(self.runtime.env)
                except Exception as error:
                    logger.exception("runtime failed to start")
                    await send({"type": "lifespan.startup.failed", "message": str(error)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                try:
                    await self.stop()
                except Exception as error:
                    logger.exception("runtime failed to close")
                    await send({"type": "lifespan.shutdown.failed", "message": str(error)})
                    return
                if not self.closed:
                    await send({"type": "lifespan.shutdown.failed", "message": "close failed"})
                    return
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def stop(self) -> None:
        """Settle the worker's pending work, then close the runtime; later calls do nothing.

        The lifespan shutdown calls it; a server on virtual time calls it earlier (see
        `virtual_server`).
        """
        if self._stopped:
            return
        self._stopped = True
        if self.worker.settle is not None:
            await self.worker.settle()
        await self.runtime.close()
        self.closed = True

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await _read_body(receive)
        if body is None:
            return
        response: FetchResponse
        if Dashboard.handles(scope["path"]):
            response = await self.dashboard.respond(scope["method"], _url(scope))
        else:
            response = await self._respond(scope, body)
        try:
            content = await response.content()
        except Exception:
            logger.exception("reading the response body failed")
            response = _failure()
            content = await response.content()
        lines = response.header_lines
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in lines]
        if not any(name.lower() == "content-length" for name, _ in lines):
            headers.append((b"content-length", str(len(content)).encode("latin-1")))
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    async def _respond(self, scope: Scope, body: bytes) -> FetchResponse:
        try:
            request = Request(
                _url(scope),
                method=scope["method"],
                headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]],
                body=body if body or scope["method"] not in ("GET", "HEAD") else None,
                redirect="manual",
            )
        except Exception:
            logger.exception("the request cannot be handed to the worker")
            return Response("Bad Request\n", status=400)
        return await self._call_worker(request)

    async def _call_worker(self, request: Request) -> FetchResponse:
        try:
            result = self.worker.fetch(request, self.runtime.env)
            if inspect.isawaitable(result):
                result = await result
        except Exception:
            logger.exception("fetch raised on %s %s", request.method, request.url)
            return _failure()
        if not isinstance(result, FetchResponse):
            logger.error(
                "fetch must return a durability.runtime.Response, got %s for %s %s",
                type(result).__name__,
                request.method,
                request.url,
            )
            return _failure()
        return result


def _failure() -> Response:
    """The answer when the worker failed, as workerd gives it (the log says why)."""
    return Response(b"Internal Server Error", status=500)


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None if the client went away first."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _url(scope: Scope) -> str:
    """The absolute URL of the request, as a Workers `request.url` reads."""
    headers = dict(scope["headers"])
    host_header = headers.get(b"host")
    if host_header is not None:
        host = host_header.decode("latin-1")
    elif scope.get("server"):
        server_host, server_port = scope["server"]
        host = f"{server_host}:{server_port}"
    else:
        host = "localhost"
    path = scope.get("raw_path") or scope["path"].encode("utf-8")
    query = scope.get("query_string", b"")
    url = f"{scope.get('scheme', 'http')}://{host}{path.decode('latin-1')}"
    return f"{url}?{query.decode('latin-1')}" if query else url
