"""The name this library is installed under, for versions and install hints.

The import name is `durability`, but the package index's `durability` is an unrelated
project, so the distribution is `durability-objects`: every hint names that one.
"""

from __future__ import annotations

DISTRIBUTION = "durability-objects"
"""The distribution name: what `pip install` takes and `importlib.metadata` knows."""


def install_hint(extra: str) -> str:
    """The pip command that installs this library with the optional `extra`."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"
