"""Static assets of a project (wrangler's `assets`), served before the worker as
`wrangler dev` serves them, and the `ASSETS` binding.

`assets.directory` holds the files. A GET or HEAD whose path names one is answered
from it before the worker runs (unless `run_worker_first` says otherwise); other
requests go to the worker. With the default `html_handling` ("auto-trailing-slash"),
`/about` serves `about.html` or redirects to `/about/` when `about/index.html` exists,
`/dir/` serves `dir/index.html`, and `/page.html` or `/dir/index.html` redirect (307) to
the address without the suffix. `not_found_handling` decides what a path with no file
gets when no worker answers it: "none" (404), "404-page" (the nearest `404.html`), or
"single-page-application" (`/index.html`, also for navigations before the worker).
"""

from __future__ import annotations

import fnmatch
import hashlib
import mimetypes
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from ...runtime._http import Request, Response

__all__ = ["AssetsBinding", "AssetsConfig", "StaticAssets"]

HTML_HANDLING = ("auto-trailing-slash", "none")
"""The `html_handling` values served; Cloudflare's other two are named at start."""

NOT_FOUND_HANDLING = ("none", "404-page", "single-page-application")

_NEVER_SERVED = frozenset({".assetsignore", "_headers", "_redirects", "_worker.js"})
"""Files in the directory that configure assets rather than being assets."""

_CACHE_CONTROL = "public, max-age=0, must-revalidate"


@dataclass(frozen=True)
class AssetsConfig:
    """The `assets` section of a wrangler config."""

    directory: Path
    binding: str | None = None
    html_handling: str = "auto-trailing-slash"
    not_found_handling: str = "none"
    run_worker_first: bool | tuple[str, ...] = False


class StaticAssets:
    """The files of an assets directory, answered as Cloudflare answers them."""

    def __init__(self, config: AssetsConfig) -> None:
        self.config = config
        self._root = config.directory.resolve()
        ignore = self._root / ".assetsignore"
        self._ignored = (
            [line.strip() for line in ignore.read_text().splitlines() if line.strip()]
            if ignore.is_file()
            else []
        )

    def worker_first(self, request: Request) -> bool:
        """Whether `request` goes to the worker before any asset lookup."""
        first = self.config.run_worker_first
        if isinstance(first, bool):
            return first
        path = urlsplit(request.url).path
        rules = [(rule[1:], False) if rule.startswith("!") else (rule, True) for rule in first]
        if any(not keep and fnmatch.fnmatchcase(path, rule) for rule, keep in rules):
            return False
        return any(keep and fnmatch.fnmatchcase(path, rule) for rule, keep in rules)

    def lookup(self, request: Request) -> Response | None:
        """The asset answer to a GET or HEAD (the file, a 304, or a redirect); `None`
        when no file matches or for other methods."""
        if request.method not in ("GET", "HEAD"):
            return None
        parts = urlsplit(request.url)
        path = posixpath.normpath(unquote(parts.path)) + ("/" if parts.path.endswith("/") else "")
        path = path.replace("//", "/")
        query = f"?{parts.query}" if parts.query else ""
        if self.config.html_handling == "none":
            file = self._file(path)
            return None if file is None else self._serve(request, file)
        if path.endswith("/"):
            file = self._file(path + "index.html")
            if file is not None:
                return self._serve(request, file)
            if path != "/" and self._file(path[:-1] + ".html") is not None:
                return _redirect(path[:-1] + query)
            return None
        file = self._file(path)
        if file is not None:
            if path.endswith("/index.html"):
                return _redirect(path[: -len("index.html")] + query)
            if path.endswith(".html"):
                return _redirect(path[: -len(".html")] + query)
            return self._serve(request, file)
        file = self._file(path + ".html")
        if file is not None:
            return self._serve(request, file)
        if self._file(path + "/index.html") is not None:
            return _redirect(path + "/" + query)
        return None

    def not_found(self, request: Request) -> Response:
        """The answer for a path with no asset, by `not_found_handling`."""
        handling = self.config.not_found_handling
        if handling == "single-page-application":
            index = self._file("/index.html")
            if index is not None:
                return self._serve(request, index)
        elif handling == "404-page":
            folder = posixpath.dirname(urlsplit(request.url).path)
            while True:
                page = self._file(posixpath.join(folder, "404.html"))
                if page is not None:
                    return self._serve(request, page, status=404)
                if folder in ("/", ""):
                    break
                folder = posixpath.dirname(folder)
        return Response(None, status=404)

    def navigation(self, request: Request) -> bool:
        """Whether a single-page application answers `request` before the worker."""
        return (
            self.config.not_found_handling == "single-page-application"
            and request.method == "GET"
            and request.headers.get("sec-fetch-mode") == "navigate"
        )

    def _file(self, path: str) -> Path | None:
        """The file the URL path `path` names, if it is a servable one."""
        relative = path.lstrip("/")
        if not relative or "\x00" in relative:
            return None
        candidate = (self._root / relative).resolve()
        if not candidate.is_relative_to(self._root) or not candidate.is_file():
            return None
        name = candidate.relative_to(self._root).as_posix()
        if candidate.name in _NEVER_SERVED and candidate.parent == self._root:
            return None
        if any(
            fnmatch.fnmatchcase(name, rule.strip("/")) or fnmatch.fnmatchcase(candidate.name, rule)
            for rule in self._ignored
        ):
            return None
        return candidate

    def _serve(self, request: Request, file: Path, status: int = 200) -> Response:
        body = file.read_bytes()
        etag = f'"{hashlib.sha256(body).hexdigest()[:32]}"'
        kind = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        if kind.startswith("text/") or kind in ("application/javascript", "application/json"):
            kind += "; charset=utf-8"
        headers = {"content-type": kind, "etag": etag, "cache-control": _CACHE_CONTROL}
        if status == 200 and etag in request.headers.get("if-none-match", ""):
            return Response(None, status=304, headers=headers)
        if request.method == "HEAD":
            return Response(None, status, headers={**headers, "content-length": str(len(body))})
        return Response(body, status, headers=headers)


def _redirect(location: str) -> Response:
    return Response(None, status=307, headers={"location": location})


class AssetsBinding:
    """`env.ASSETS`: `await env.ASSETS.fetch(request)` answers from the assets alone."""

    def __init__(self, assets: StaticAssets) -> None:
        self._assets = assets

    async def fetch(self, request: Any, init: Any = None) -> Response:
        """The asset answer to `request` (a `Request` or a URL), or the not-found one."""
        if isinstance(request, str):
            request = Request(request)
        if not isinstance(request, Request):
            raise TypeError(f"ASSETS.fetch takes a Request or a URL, got {type(request).__name__}")
        return self._assets.lookup(request) or self._assets.not_found(request)

    def __repr__(self) -> str:
        return f"AssetsBinding({self._assets.config.directory})"
