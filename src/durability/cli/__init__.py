"""The `durability` command: `serve`, `inspect`, `check` and the dashboard of `serve`.

This package sits above the embedded runtime (`durability.runtime`) and is the only
part of the library that needs the `serve` extra (uvicorn, wsproto).
"""

from __future__ import annotations

from ._main import main

__all__ = ["main"]
