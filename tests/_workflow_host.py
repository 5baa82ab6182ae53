"""An object whose one workflow runs a script the test chooses, and a runtime around it.

`Flows.flow` looks its body up in the `SCRIPTS` binding by the name given in the
instance's params (``{"script": name, ...}``), so each test writes its workflow inline
as ``async def script(obj, event, step)``. `World` records what the scripts did.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _hosts import hosted
from durability import Durable, WorkflowEvent, WorkflowStep, now_ms, workflow
from durability.runtime import DurableObject, ObjectStub, Runtime
from durability.testing import VirtualClock

Script = Callable[[Any, WorkflowEvent, WorkflowStep], Awaitable[Any]]


@dataclass
class World:
    """The scripts, and what happened outside the object: `(label, time)` pairs."""

    scripts: dict[str, Script] = field(default_factory=dict)
    log: list[tuple[Any, int]] = field(default_factory=list)

    def note(self, label: Any) -> None:
        self.log.append((label, now_ms()))

    def labels(self) -> list[Any]:
        return [label for label, _ in self.log]


class Flows(Durable, DurableObject):
    """One workflow, `flow`, whose body is the script its params name."""

    @workflow
    async def flow(self, event: WorkflowEvent, step: WorkflowStep) -> Any:
        world: World = self.env["WORLD"]
        return await world.scripts[event.payload["script"]](self, event, step)

    async def create(
        self, id: str | None, script: str, params: dict[str, Any] | None = None
    ) -> str:
        instance = await self.flow.create(id=id, params={"script": script, **(params or {})})
        return instance.id

    async def status(self, id: str) -> dict[str, Any]:
        return dict(await (await self.flow.get(id)).status())

    async def act(self, id: str, action: str) -> None:
        instance = await self.flow.get(id)
        await getattr(instance, action)()

    async def send(self, id: str, event_type: str, payload: Any = None) -> None:
        await (await self.flow.get(id)).send_event(type=event_type, payload=payload)

    def free_permits(self) -> list[int]:
        """The scheduler's free permits and its pool size."""
        permits = self.scheduler._engine.permits
        return [permits.free, permits.size]

    def sql(self, query: str) -> list[list[Any]]:
        return [list(row) for row in self.ctx.storage.sql.exec(query).raw()]


@dataclass
class Lab:
    """A running runtime with one `Flows` object, its clock and its world."""

    runtime: Runtime
    clock: VirtualClock
    world: World
    stub: ObjectStub

    async def start(self, script: Script, id: str = "i1", **params: Any) -> str:
        self.world.scripts[script.__name__] = script
        created: str = await self.stub.create(id, script.__name__, params)
        return created

    async def status(self, id: str = "i1") -> dict[str, Any]:
        found: dict[str, Any] = await self.stub.status(id)
        return found

    async def steps(self, id: str = "i1") -> list[list[Any]]:
        rows: list[list[Any]] = await self.stub.sql(
            "SELECT kind, name, status, attempt FROM durability_workflow_steps "
            f"WHERE instance_key = 'flow:{id}' ORDER BY seq"
        )
        return rows


@asynccontextmanager
async def lab(path: Path | None = None, world: World | None = None) -> AsyncIterator[Lab]:
    """A runtime (in memory, or on `path`) hosting `Flows` as FLOWS on a virtual clock, on
    the test's host."""
    world = world or World()
    clock = VirtualClock()
    bindings = {"FLOWS": Flows, "WORLD": world}
    async with Runtime(path=path, bindings=bindings, clock=clock, **hosted()) as rt:
        yield Lab(rt, clock, world, rt.env.FLOWS.get_by_name("flows"))
