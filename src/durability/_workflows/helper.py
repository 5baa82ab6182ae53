"""`DurabilityWorkflows`: durable workflows kept in a Durable Object's own SQLite.

Each workflow is a `run(event, step)` function; its instances run on the object's
scheduler and alarm, beside the object's other helpers, and their journal commits with
the object's own writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Unpack

from .._context import Context
from .._validate import check_callable
from .body import WorkflowCode
from .control import Control
from .engine import (
    LATEST,
    DurabilityScheduler,
    HostAlarmInfo,
    MigrationResult,
    MigrationTarget,
    SchedulerOptionArgs,
    WorkflowEngine,
    migrate_schema,
)
from .handles import Workflow
from .runner import Runner
from .validate import check_workflow_name


class DurabilityWorkflows:
    """The workflows of one object, each `name: run(event, step)`.

    `scheduler=` (shared) or `context=` plus any scheduler option attaches it, as every
    helper does. `helper.<name>` (or `helper.workflow(name)`) is the workflow's
    `Workflow`: `create`, `create_batch`, `get`. The object's `alarm()` must reach the
    scheduler's (`await helper.alarm(info)` does).
    """

    def __init__(
        self,
        *,
        workflows: Mapping[str, WorkflowCode],
        scheduler: DurabilityScheduler | None = None,
        context: Context | None = None,
        **scheduler_options: Unpack[SchedulerOptionArgs],
    ) -> None:
        if not isinstance(workflows, Mapping):
            raise TypeError(f"workflows must be a mapping, got {type(workflows).__name__}")
        for name, code in workflows.items():
            check_workflow_name(name)
            if name.startswith("_") or name in _RESERVED:
                raise ValueError(f'"{name}" is reserved by DurabilityWorkflows')
            check_callable(f'workflow "{name}"', code)
        engine = WorkflowEngine(scheduler=scheduler, context=context, options=scheduler_options)
        self._code = dict(workflows)
        """Each workflow's code, by name (what `durability check` holds stored runs to)."""
        self._control = Control(Runner(engine, workflows))
        self._handles = {name: Workflow(self._control, name) for name in workflows}
        engine.start(self._control.runner.run_due)
        engine.on_emptied(self._control.abort_all)

    def __getattr__(self, name: str) -> Workflow:
        handles: dict[str, Workflow] = self.__dict__.get("_handles", {})
        if name in handles:
            return handles[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def workflow(self, name: str) -> Workflow:
        """The workflow `name`; `ValueError` when there is none."""
        found = self._handles.get(name)
        if found is None:
            raise ValueError(f'no workflow named "{name}"')
        return found

    @property
    def names(self) -> list[str]:
        """The workflows' names."""
        return list(self._handles)

    async def alarm(self, info: HostAlarmInfo | None = None) -> None:
        """Run due work of every helper on this helper's scheduler (the object's alarm)."""
        await self._control.runner.engine.alarm(info)

    @classmethod
    def migrate(cls, context: Context, target: MigrationTarget = LATEST) -> MigrationResult:
        """Move the workflows' schema to `target` (`LATEST`, a migration name, or `None`)."""
        return migrate_schema(context, target)


_RESERVED = frozenset(name for name in vars(DurabilityWorkflows) if not name.startswith("_"))
