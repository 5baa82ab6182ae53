"""Where the example projects are."""

from __future__ import annotations

from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def project(name: str) -> Path:
    """The folder of example `name` (a wrangler project)."""
    return EXAMPLES / name
