"""The read-only dashboard `durability serve` mounts at `/_durability`.

It shows what `durability inspect` shows (objects by namespace and name, their
operations, named alarms, logs and fanout, recent failures with their tracebacks) as a
page that refreshes itself, and, for a server on virtual time, a way to move it on.
"""

from __future__ import annotations

from .app import PREFIX, Dashboard

__all__ = ["PREFIX", "Dashboard"]
