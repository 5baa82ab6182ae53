"""Wrangler `workflows` bindings under `durability serve`: Cloudflare's Workflow API.

`workflow_binding(cls, name)` is the binding of a `WorkflowEntrypoint` subclass: the
runtime hosts one object per instance (named by the instance id, in a namespace named
after the binding), each running its one instance on its own scheduler and alarm, so an
instance's state lives in its own SQLite file and survives restarts; `env.<BINDING>` is
a `WorkflowBinding` whose `create`, `create_batch` and `get` reach those objects.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, ClassVar

from ..._types import JsonValue
from ..._uuid import random_uuid
from ..._workflows.errors import WorkflowError
from ..._workflows.handles import _UNSET, Workflow, create_options, event_options
from ..._workflows.helper import DurabilityWorkflows
from ..._workflows.validate import MAX_BATCH, check_instance_id, check_workflow_name
from ..._workflows.values import AttrDict, WorkflowEvent, attr_copy
from ...runtime._bindings import HostedBinding
from ...runtime._object import DurableObject
from ...runtime._stub import ObjectNamespace, ObjectStub


class WorkflowContext:
    """The `ctx` a `WorkflowEntrypoint` gets: `wait_until` keeps work of the instance going."""

    __slots__ = ("_ctx",)

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx

    def wait_until(self, awaitable: Awaitable[Any]) -> None:
        """Keep `awaitable` running after the step that started it."""
        self._ctx.wait_until(awaitable)

    waitUntil = wait_until


class WorkflowHost(DurableObject):
    """The object of one instance of a bound workflow (its name is the instance id)."""

    entrypoint: ClassVar[type]
    workflow_name: ClassVar[str]

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        entrypoint, ctx_for_code = self.entrypoint, WorkflowContext(ctx)

        def run(event: WorkflowEvent, step: Any) -> Any:
            return entrypoint(ctx_for_code, env).run(event, step)

        self.workflows = DurabilityWorkflows(context=ctx, workflows={self.workflow_name: run})
        self._workflow: Workflow = self.workflows.workflow(self.workflow_name)

    async def create_instance(self, instance_id: str, params: JsonValue, reuse: bool) -> None:
        """Start the instance (`reuse`: an existing one is kept as it is)."""
        if reuse:
            await self._workflow.create_batch([{"id": instance_id, "params": params}])
        else:
            await self._workflow.create(id=instance_id, params=params)

    async def instance_exists(self, instance_id: str) -> bool:
        """Whether this object holds the instance."""
        try:
            await self._workflow.get(instance_id)
        except WorkflowError:
            return False
        return True

    async def control(self, instance_id: str, action: str) -> JsonValue:
        """`status`, `pause`, `resume`, `terminate` or `restart` the instance."""
        if action not in _ACTIONS:
            raise ValueError(f"unknown instance action {action!r}")
        instance = await self._workflow.get(instance_id)
        result = await getattr(instance, action)()
        return None if result is None else dict(result)

    async def send_instance_event(
        self, instance_id: str, event_type: str, payload: JsonValue
    ) -> None:
        """Send an event to the instance."""
        instance = await self._workflow.get(instance_id)
        await instance.send_event(type=event_type, payload=payload)

    async def alarm(self, info: Any = None) -> None:
        """The object's alarm: the instance's due work."""
        await self.workflows.alarm(info)


_ACTIONS = frozenset({"status", "pause", "resume", "terminate", "restart"})


class BoundInstance:
    """An instance of a bound workflow, as `create` and `get` return it."""

    __slots__ = ("_stub", "id")

    def __init__(self, stub: ObjectStub, id: str) -> None:
        self._stub = stub
        self.id = id

    def __repr__(self) -> str:
        return f"WorkflowInstance({self.id!r})"

    async def status(self) -> AttrDict:
        """``{"status", "error", "output"}`` of the instance."""
        found = await self._stub.control(self.id, "status")
        result: AttrDict = attr_copy(found)
        return result

    async def pause(self) -> None:
        """Pause the instance (steps running now finish first)."""
        await self._stub.control(self.id, "pause")

    async def resume(self) -> None:
        """Resume a paused instance."""
        await self._stub.control(self.id, "resume")

    async def terminate(self) -> None:
        """Stop the instance for good; `WorkflowError` if it already ended."""
        await self._stub.control(self.id, "terminate")

    async def restart(self) -> None:
        """Run the instance again from the start."""
        await self._stub.control(self.id, "restart")

    async def send_event(
        self, options: object = None, /, type: object = _UNSET, payload: object = _UNSET
    ) -> None:
        """Send an event for `wait_for_event` (``type=``, ``payload=``, or one dict)."""
        event_type, value = event_options(options, type, payload)
        await self._stub.send_instance_event(self.id, event_type, value)

    sendEvent = send_event


class WorkflowBinding:
    """`env.<BINDING>` of a wrangler `workflows` entry: creates and finds instances."""

    __slots__ = ("_namespace", "name")

    def __init__(self, namespace: ObjectNamespace, name: str) -> None:
        self._namespace = namespace
        self.name = name

    def __repr__(self) -> str:
        return f"WorkflowBinding({self.name!r})"

    async def create(
        self, options: object = None, /, *, id: object = _UNSET, params: object = _UNSET
    ) -> BoundInstance:
        """Start a new instance (`id` new to this workflow, default random)."""
        instance_id, values = create_options(options, id, params)
        return await self._create(instance_id, values, reuse=False)

    async def _create(self, instance_id: object, params: Any, *, reuse: bool) -> BoundInstance:
        chosen = random_uuid() if instance_id is None else check_instance_id(instance_id)
        stub = self._namespace.get_by_name(chosen)
        await stub.create_instance(chosen, params, reuse)
        return BoundInstance(stub, chosen)

    async def create_batch(self, batch: Sequence[Mapping[str, Any]]) -> list[BoundInstance]:
        """Start up to 100 instances (ids that exist already are kept as they are)."""
        if isinstance(batch, (str, bytes, Mapping)) or not isinstance(batch, Sequence):
            raise TypeError("create_batch takes a list of {id, params} dicts")
        if not batch:
            raise WorkflowError("create_batch needs at least 1 instance")
        if len(batch) > MAX_BATCH:
            raise WorkflowError(
                f"create_batch takes at most {MAX_BATCH} instances, got {len(batch)}"
            )
        items = [create_options(options, _UNSET, _UNSET) for options in batch]
        return [await self._create(found, params, reuse=True) for found, params in items]

    createBatch = create_batch

    def object_of(self, id: str) -> ObjectStub:
        """The stub of the object that holds (or would hold) instance `id`."""
        return self._namespace.get_by_name(check_instance_id(id))

    async def get(self, id: str) -> BoundInstance:
        """The instance `id`; `WorkflowError` when there is none."""
        chosen = check_instance_id(id)
        stub = self._namespace.get_by_name(chosen)
        if not await stub.instance_exists(chosen):
            raise WorkflowError(f'workflow "{self.name}" has no instance "{chosen}"')
        return BoundInstance(stub, chosen)


def workflow_binding(entrypoint: type, name: str) -> HostedBinding:
    """The binding of workflow `name` run by `entrypoint` (a class with `run(event, step)`)."""
    check_workflow_name(name)
    if not callable(getattr(entrypoint, "run", None)):
        raise TypeError(f"{entrypoint.__name__} must define run(self, event, step)")
    host = type(
        f"{entrypoint.__name__}Instances",
        (WorkflowHost,),
        {"entrypoint": entrypoint, "workflow_name": name, "__module__": __name__},
    )
    return HostedBinding(host, lambda namespace: WorkflowBinding(namespace, name))
