"""Random ids: generations, lease batch ids and log deduplication keys."""

from __future__ import annotations

import os


def random_uuid() -> str:
    """A random version-4 UUID in its canonical 36-character form.

    Built from `os.urandom` directly: `str(uuid.uuid4())` costs about twice as much.
    """
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
