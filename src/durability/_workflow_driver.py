"""`WorkflowDriver`: drive workflow instances from a test, on a runtime's virtual clock.

It reaches an instance from outside its object: through a stub of a `Durable` object
with `@workflow` methods (or any object holding a `DurabilityWorkflows` as
`self.workflows`), or through a wrangler workflow binding (`runtime.env.MY_WORKFLOW`).
It reads statuses, sends events, and moves time to each next wake-up of an instance
until it reaches the states a test waits for.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._clock import now_ms
from ._workflows.helper import DurabilityWorkflows
from ._workflows.rows import InstanceRow
from ._workflows.values import AttrDict

if TYPE_CHECKING:
    from ._virtual_clock import VirtualClock
    from .runtime import ObjectStub, Runtime

FINAL_STATES = ("complete", "errored", "terminated")

_MAX_STEPS = 100_000
"""How many wake-ups `run_until` goes through at most before it gives up."""


class WorkflowDriver:
    """Statuses, events and time for the workflow instances of a runtime's objects."""

    def __init__(self, runtime: Runtime, clock: VirtualClock) -> None:
        self.runtime = runtime
        self.clock = clock

    async def status(self, target: object, id: str, *, workflow: str | None = None) -> AttrDict:
        """`{status, error, output}` of instance `id`."""
        found: AttrDict = await self._inside(
            target, id, workflow, lambda helper, name: helper.workflow(name).get(id), "status"
        )
        return found

    async def send_event(
        self,
        target: object,
        id: str,
        event_type: str,
        payload: Any = None,
        *,
        workflow: str | None = None,
    ) -> None:
        """Send instance `id` an event of `event_type`."""

        async def send(helper: DurabilityWorkflows, name: str) -> None:
            instance = await helper.workflow(name).get(id)
            await instance.send_event(type=event_type, payload=payload)

        await self._inside(target, id, workflow, send)

    async def advance(self, ms: int) -> None:
        """Move the virtual clock forward by `ms`, running what comes due."""
        await self.clock.advance(ms)

    async def run_until(
        self,
        target: object,
        id: str,
        states: Collection[str] = FINAL_STATES,
        *,
        workflow: str | None = None,
    ) -> AttrDict:
        """Move time from one wake-up of instance `id` to the next until its status is
        one of `states` (by default complete, errored or terminated); its status then.

        Raises `RuntimeError` when the instance stops in another state with nothing to
        wake it (paused, or ended)."""
        for _ in range(_MAX_STEPS):
            await self.clock.run_until_idle()
            row: InstanceRow = await self._inside(
                target, id, workflow, lambda helper, name: helper._control.row(name, id)
            )
            if row.state in states:
                return row.status_view()
            if row.status != "pending":
                raise RuntimeError(f'instance "{id}" is {row.state}: nothing will run it')
            await self.clock.advance_to(max(row.next_attempt_at, now_ms()))
        raise RuntimeError(f'instance "{id}" did not reach {sorted(states)}')

    async def _inside(
        self,
        target: object,
        id: str,
        workflow: str | None,
        call: Callable[[DurabilityWorkflows, str], Any],
        then: str | None = None,
    ) -> Any:
        """Run `call(helper, workflow name)` as a call into the object holding instance
        `id`; `then` names a method of what it returns to call and await there too."""
        stub, name = _resolve(target, id, workflow)

        async def invoke(obj: Any) -> Any:
            helper = vars(obj).get("workflows")
            if not isinstance(helper, DurabilityWorkflows):
                raise TypeError(f"{type(obj).__name__} holds no workflows (self.workflows)")
            chosen = name or _only(helper)
            result = call(helper, chosen)
            if hasattr(result, "__await__"):
                result = await result
            if then is not None:
                result = await getattr(result, then)()
            return result

        instance = self.runtime._instance(stub.id)
        return await self.runtime.run(instance, invoke)


@runtime_checkable
class BoundWorkflow(Protocol):
    """A wrangler workflow binding as `durability serve` builds it (`env.MY_WORKFLOW`):
    its workflow's name, and the object that holds each instance."""

    name: str

    def object_of(self, id: str) -> ObjectStub: ...


def _resolve(target: object, id: str, workflow: str | None) -> tuple[ObjectStub, str | None]:
    """The stub of the object holding instance `id`, and the workflow's name if known."""
    from .runtime import ObjectStub

    if isinstance(target, ObjectStub):
        return target, workflow
    if isinstance(target, BoundWorkflow):
        return target.object_of(id), target.name
    raise TypeError(
        f"target must be an object's stub or a workflow binding, got {type(target).__name__}"
    )


def _only(helper: DurabilityWorkflows) -> str:
    names = helper.names
    if len(names) != 1:
        raise ValueError(f"the object has workflows {names}: pass workflow=NAME")
    return names[0]
