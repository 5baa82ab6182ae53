"""`WorkflowEntrypoint`: the base class of a workflow bound in wrangler's `workflows`.

As on Cloudflare: `self.env` holds the bindings, `self.ctx` the worker's execution
context (`wait_until`), and `run(self, event, step)` is the workflow. Under `durability
serve` a new instance of the class runs each run of an instance.
"""

from __future__ import annotations

from typing import Any


class WorkflowEntrypoint:
    """Subclass it and define ``async def run(self, event, step)``."""

    def __init__(self, ctx: Any, env: Any) -> None:
        self.ctx = ctx
        self.env = env
