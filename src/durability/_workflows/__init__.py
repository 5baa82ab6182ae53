"""Durable workflows: Cloudflare's Python Workflows API, journaled in an object's SQLite.

Modules, top-down: the faces (`declare`: `@workflow` on `Durable` classes; `helper`:
`DurabilityWorkflows`; `handles`: `Workflow` and `WorkflowInstance`), the instance calls
(`control`), runs (`runner`: the executor of runs on the engine's `AttemptRunner`;
`body`: one run's code and how it ended; `run`: its replay state) and the step kinds
(`api`: the `step` object; `steps`: do, sleep, wait), then the storage (`rows`,
`journal`, `schema`), the one seam to the engine (`engine`), and leaves (`durations`,
`validate`, `values`, `errors`). The wrangler `workflows` bindings of `durability serve`
live in the serve layer (`durability.cli._serve.workflows`), and `WorkflowDriver` in
`_workflow_driver`.
"""

from __future__ import annotations

from .api import StepFunction, WorkflowStep
from .declare import WorkflowMethod, workflow
from .entrypoint import WorkflowEntrypoint
from .errors import (
    WorkflowDeterminismError,
    WorkflowError,
    WorkflowStepError,
    WorkflowTimeoutError,
)
from .handles import Workflow, WorkflowInstance
from .helper import DurabilityWorkflows
from .values import AttrDict, WorkflowEvent

__all__ = [
    "AttrDict",
    "DurabilityWorkflows",
    "StepFunction",
    "Workflow",
    "WorkflowDeterminismError",
    "WorkflowEntrypoint",
    "WorkflowError",
    "WorkflowEvent",
    "WorkflowInstance",
    "WorkflowMethod",
    "WorkflowStep",
    "WorkflowStepError",
    "WorkflowTimeoutError",
    "workflow",
]
