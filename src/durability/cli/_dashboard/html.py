"""Small HTML builders for the dashboard: escaped text, tables and times.

Every value that reaches the page goes through `text()` (or a builder that uses it):
object names, ids, error messages and tracebacks are user data and must never be read
as markup.
"""

from __future__ import annotations

import hashlib
import html
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

_ERROR_WIDTH = 120
"""Errors are cut to this many characters in tables; the traceback holds the rest."""


def text(value: object) -> str:
    """`value` as escaped HTML text (`None` is empty)."""
    return "" if value is None else html.escape(str(value), quote=True)


def tag(name: str, content: str, **attributes: object) -> str:
    """`<name attributes>content</name>`; `content` must already be HTML."""
    attrs = "".join(
        f' {key.rstrip("_").replace("_", "-")}="{text(value)}"'
        for key, value in attributes.items()
        if value is not None
    )
    return f"<{name}{attrs}>{content}</{name}>"


def table(header: Sequence[str], rows: Iterable[Sequence[str]], css: str = "") -> str:
    """A table whose cells are already HTML (build them with `text()`)."""
    head = "".join(tag("th", text(cell), scope="col") for cell in header)
    body = "".join(tag("tr", "".join(tag("td", cell) for cell in row)) for row in rows)
    return tag("table", tag("thead", tag("tr", head)) + tag("tbody", body), class_=css or None)


def stable_id(*parts: object) -> str:
    """An element id derived from `parts`, the same on every refresh (and safe in HTML)."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8)
    return f"d-{digest.hexdigest()}"


def moment(ms: Any, now_ms: int) -> str:
    """A time in ms as UTC, with how far it is from now (`-` when there is none)."""
    if ms is None:
        return '<span class="muted">-</span>'
    relative = tag("span", text(relative_time(int(ms) - now_ms)), class_="rel")
    return f"{utc(ms)} {relative}"


def utc(ms: int) -> str:
    """A time in ms as a `<time>` element, to the second, in UTC."""
    when = datetime.fromtimestamp(ms / 1000, UTC)
    stamp = when.strftime("%Y-%m-%d %H:%M:%S")
    return tag("time", text(stamp), datetime=when.isoformat(timespec="milliseconds"))


def relative_time(delta_ms: int) -> str:
    """`in 3 d 4 h`, `5 min ago`, `now`: the two largest units of a signed delay."""
    seconds = abs(delta_ms) // 1000
    if seconds == 0:
        return "now"
    amounts: list[tuple[int, str]] = []
    for unit, unit_seconds in (("d", 86_400), ("h", 3_600), ("min", 60), ("s", 1)):
        count, seconds = divmod(seconds, unit_seconds)
        amounts.append((count, unit))
    first = next(index for index, (count, _) in enumerate(amounts) if count)
    parts = [f"{count} {unit}" for count, unit in amounts[first : first + 2] if count]
    span = " ".join(parts)
    return f"in {span}" if delta_ms > 0 else f"{span} ago"


def error_cell(row: dict[str, Any]) -> str:
    """A record's last error, `Name: message`, cut to a table cell's width."""
    if row.get("last_error") is None and row.get("last_error_name") is None:
        return ""
    message = f"{row['last_error_name'] or 'Error'}: {row['last_error'] or ''}".rstrip(": ")
    message = " ".join(message.split())
    if len(message) > _ERROR_WIDTH:
        message = message[: _ERROR_WIDTH - 1] + "…"
    return tag("span", text(message), class_="error")


def traceback(row: dict[str, Any], *identity: object) -> str:
    """The stored traceback of a record's last error, folded (empty when none is stored)."""
    stack = row.get("last_error_stack")
    if not stack:
        return ""
    return tag(
        "details",
        tag("summary", "traceback") + tag("pre", text(stack.rstrip())),
        id=stable_id("traceback", *identity),
        class_="traceback",
    )
