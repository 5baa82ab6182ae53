"""`.dev.vars` files: `NAME=value` lines, in the dotenv format wrangler reads.

One assignment per line (`export ` before the name is allowed); blank lines and lines
starting with `#` are skipped. A value in single quotes is taken as written; in double
quotes, `\\n`, `\\t`, `\\"` and `\\\\` are escapes and the value may span lines; an
unquoted value ends at ` #` (a comment) and is stripped.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["DotenvError", "parse_dotenv", "read_dotenv"]

_ASSIGNMENT = re.compile(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(.*)", re.DOTALL)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}


class DotenvError(ValueError):
    """A line of a dotenv file is not `NAME=value`."""


def read_dotenv(path: Path) -> dict[str, str]:
    """The names and values assigned in the file at `path`."""
    try:
        return parse_dotenv(path.read_text(encoding="utf-8"))
    except DotenvError as error:
        raise DotenvError(f"{path}: {error}") from None


def parse_dotenv(text: str) -> dict[str, str]:
    """The names and values assigned in `text`; a later assignment wins."""
    values: dict[str, str] = {}
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line, number = lines[index], index + 1
        index += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _ASSIGNMENT.fullmatch(line)
        if match is None:
            raise DotenvError(f"line {number} is not NAME=value: {line.strip()[:40]!r}")
        name, raw = match.group(1), match.group(2)
        if raw.startswith('"'):
            while (end := _closing(raw)) is None and index < len(lines):
                raw += "\n" + lines[index]
                index += 1
            if end is None:
                raise DotenvError(f"line {number}: the double quote is never closed")
            values[name] = _unescape(raw[1:end])
        elif raw.startswith("'"):
            end = raw.find("'", 1)
            if end == -1:
                raise DotenvError(f"line {number}: the single quote is never closed")
            values[name] = raw[1:end]
        else:
            values[name] = raw.split(" #", 1)[0].strip()
    return values


def _closing(raw: str) -> int | None:
    """Where the double-quoted value starting `raw` closes, or `None` if it does not."""
    escaped = False
    for index, char in enumerate(raw[1:], 1):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            return index
    return None


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), value)
