"""`load_worker` and `WorkerApp` under the name the docs use: `durability.runtime.server`.

They live in the serve layer (`durability.cli._serve.server`), above the embedded
runtime; this module only gives them their documented path, and the embedded runtime
itself never imports it.
"""

from __future__ import annotations

from ...cli._serve.server import WorkerApp, WorkerModule, WorkerModuleError, load_worker

__all__ = ["WorkerApp", "WorkerModule", "WorkerModuleError", "load_worker"]
