"""The routes under `/_durability`: the page, its data, its assets and the time control.

- `GET /_durability`: the page (the panel rendered in, refreshed by a small script).
- `GET /_durability/api/panel`: the panel alone, as HTML, for the refresh.
- `GET /_durability/api/objects`: the same data as JSON (the `durability inspect --json`
  reports, with the runtime's time).
- `GET /_durability/assets/<name>`: the stylesheet and script, served from the package.
- `POST /_durability/advance?ms=N`: moves a virtual clock forward (`--virtual-time`).

Everything but `advance` only reads: the objects' files are opened read-only, in a
thread, so a slow disk never stalls the worker's requests, and only the files that
changed since the last refresh are read again.
"""

from __future__ import annotations

import asyncio
import logging
import re
from importlib import resources
from pathlib import Path
from string import Template
from urllib.parse import parse_qs, urlsplit

from ..._clock import Clock
from ..._virtual_clock import VirtualClock
from ...runtime._http import Response
from .._inspect import InspectError
from .html import text
from .render import Snapshot, render_panel
from .reports import ReportCache

PREFIX = "/_durability"
"""Where the dashboard is mounted; the worker's `fetch` never sees these paths."""

REFRESH_MS = 2_000
"""How often the page fetches a fresh panel."""

MAX_ADVANCE_MS = 10 * 366 * 86_400_000
"""The largest step `advance` takes at once (about ten years)."""

_ASSETS = {
    "dashboard.css": "text/css; charset=utf-8",
    "dashboard.js": "text/javascript; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
_DIGITS = re.compile(r"[0-9]{1,20}")
_PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""Only the package's own script and stylesheet run: stored text can never act as code."""
_NO_STORE = {"cache-control": "no-store"}
_HTML = {**_NO_STORE, "content-type": "text/html; charset=utf-8"}

logger = logging.getLogger("durability.serve")


class Dashboard:
    """The read-only view of a runtime's directory, and the clock control of a demo.

    `path` is the runtime's directory (`None` for an in-memory runtime: nothing to
    read); `clock` its clock, which `advance` moves when it is a `VirtualClock`.
    """

    def __init__(self, path: Path | None, clock: Clock) -> None:
        self._path = path
        self._clock = clock
        self._advancing = asyncio.Lock()
        self._reports = ReportCache(path) if path is not None else None
        self._reading = asyncio.Lock()

    @staticmethod
    def handles(path: str) -> bool:
        """Whether a request for `path` is the dashboard's rather than the worker's."""
        return path == PREFIX or path.startswith(PREFIX + "/")

    async def respond(self, method: str, url: str) -> Response:
        """The answer to `method url`, for a `url` under `/_durability` (500 if it raised)."""
        try:
            return await self._route(method, url)
        except Exception as error:
            logger.exception("dashboard failed on %s %s", method, url)
            return Response(f"Internal Server Error: {type(error).__name__}\n", status=500)

    async def _route(self, method: str, url: str) -> Response:
        parts = urlsplit(url)
        route = parts.path.removeprefix(PREFIX).rstrip("/")
        if route == "/advance":
            if method != "POST":
                return _not_allowed("POST")
            return await self._advance(parts.query)
        if method != "GET":
            return _not_allowed("GET")
        if route == "":
            return await self._page()
        if route == "/api/panel":
            return Response(render_panel(await self.snapshot()), headers=_HTML)
        if route == "/api/objects":
            return Response.json(_as_json(await self.snapshot()), headers=_NO_STORE)
        asset = route.removeprefix("/assets/")
        if asset in _ASSETS:
            body = (resources.files(__package__) / "assets" / asset).read_bytes()
            return Response(body, headers={"content-type": _ASSETS[asset]})
        return Response(f"not found: {parts.path}\n", status=404)

    async def snapshot(self) -> Snapshot:
        """The reports of every object in the directory, read now."""
        now_ms = self._clock.now_ms()
        virtual = isinstance(self._clock, VirtualClock)
        path = str(self._path) if self._path is not None else None
        if self._reports is None:
            return Snapshot(now_ms, virtual, None, [], "in-memory runtime: nothing on disk")
        try:
            async with self._reading:
                objects = await asyncio.to_thread(self._reports.reports)
        except InspectError as error:
            return Snapshot(now_ms, virtual, path, [], str(error))
        return Snapshot(now_ms, virtual, path, objects)

    async def _page(self) -> Response:
        snapshot = await self.snapshot()
        template = (resources.files(__package__) / "assets" / "page.html").read_text("utf-8")
        page = Template(template).substitute(
            title=text(snapshot.path if snapshot.path is not None else "memory"),
            refresh_ms=REFRESH_MS,
            panel=render_panel(snapshot),
        )
        return Response(page, headers={**_HTML, "content-security-policy": _PAGE_POLICY})

    async def _advance(self, query: str) -> Response:
        clock = self._clock
        if not isinstance(clock, VirtualClock):
            message = "time runs on the wall clock: start `durability serve` with --virtual-time"
            return Response.json({"error": message}, status=409)
        values = parse_qs(query, keep_blank_values=True).get("ms", [])
        step = values[0] if len(values) == 1 else ""
        if not _DIGITS.fullmatch(step) or int(step) > MAX_ADVANCE_MS:
            rule = f"ms must be one integer from 0 to {MAX_ADVANCE_MS} (milliseconds)"
            shown = "missing" if not values else ", ".join(map(repr, values))
            return Response.json({"error": f"{rule}, got {shown}"}, status=400)
        async with self._advancing:
            before = clock.now_ms()
            await clock.advance(int(step))
        logger.info("virtual time advanced by %s ms to %s", step, clock.now_ms())
        return Response.json({"advanced_ms": clock.now_ms() - before, "now_ms": clock.now_ms()})


def _as_json(snapshot: Snapshot) -> dict[str, object]:
    return {
        "now_ms": snapshot.now_ms,
        "virtual_time": snapshot.virtual_time,
        "path": snapshot.path,
        "error": snapshot.error,
        "objects": list(snapshot.objects),
    }


def _not_allowed(allow: str) -> Response:
    return Response(
        f"method not allowed (allowed: {allow})\n", status=405, headers={"allow": allow}
    )
