"""URLs as JavaScript's `URL` parser writes them back (the parts Workers code meets).

`Request(url)`, `fetch(url)` and `Response.redirect(url)` take an absolute URL and use
its normal form: scheme and host in lower case, the scheme's default port dropped, an
empty path written as `/`, spaces and non-ASCII characters in the path and query
percent-encoded. A relative or malformed URL is invalid (`None` here).
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit

SPECIAL_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21, "file": None}
"""The schemes the URL standard calls special, and their default ports."""

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_PATH_SAFE = "/:@!$&'()*+,;=-._~%[]|^"
_QUERY_SAFE = "/:@!$&'()*+,;=-._~%?[]|^{}`\\"


def normalize_url(url: str) -> str | None:
    """The normal form of absolute `url`, or `None` if it is not a valid absolute URL."""
    text = url.strip()
    if not _SCHEME.match(text):
        return None
    try:
        parts = urlsplit(text.replace("\\", "/") if _is_special(text) else text)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in SPECIAL_PORTS:
        return text
    host = (parts.hostname or "").lower()
    if not host and scheme != "file":
        return None
    netloc = host if ":" not in host else f"[{host}]"
    if parts.username is not None:
        credentials = parts.username + (f":{parts.password}" if parts.password else "")
        netloc = f"{credentials}@{netloc}"
    if port is not None and port != SPECIAL_PORTS[scheme]:
        netloc += f":{port}"
    path = quote(parts.path or "/", safe=_PATH_SAFE)
    normal = f"{scheme}://{netloc}{path}"
    if parts.query or text.split("#", 1)[0].endswith("?"):
        normal += "?" + quote(parts.query, safe=_QUERY_SAFE)
    if parts.fragment or "#" in text:
        normal += "#" + quote(parts.fragment, safe=_QUERY_SAFE + "#")
    return normal


def _is_special(text: str) -> bool:
    return text.split(":", 1)[0].lower() in SPECIAL_PORTS
