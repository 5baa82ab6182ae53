"""Small file-system helpers for the parts that write files (the runtime, cold stores)."""

from __future__ import annotations

import os
from pathlib import Path


def sync_directory(directory: Path) -> None:
    """fsync a directory, making the entries just created or renamed in it durable."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
