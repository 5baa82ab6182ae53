"""Text for a terminal: stored strings shown with their control characters escaped.

Names, ids and error texts come from users and from failures; written raw, an escape
sequence among them would clear the screen, set the window title or hide lines. What
`durability inspect` prints goes through `printable` first, as the dashboard's HTML
goes through `html.escape`.
"""

from __future__ import annotations

import unicodedata

_ESCAPED_CATEGORIES = frozenset({"Cc", "Zl", "Zp"})
"""C0 and C1 controls and DEL, and the line and paragraph separators."""

_BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
"""Characters that reorder the text around them (a line could show other than it holds)."""

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def printable(value: object) -> str:
    """`value` as text with every control character written as an escape (`\\x1b`,
    `\\t`, `\\u202e`, ...); other characters, backslashes included, are kept."""
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():
        return text
    return "".join(_escaped(character) for character in text)


def _escaped(character: str) -> str:
    if character.isprintable():
        return character
    if character not in _BIDI_CONTROLS and (
        unicodedata.category(character) not in _ESCAPED_CATEGORIES
    ):
        return character
    named = _NAMED.get(character)
    if named is not None:
        return named
    code = ord(character)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
