"""`Workflow` and `WorkflowInstance`: the instance API of Cloudflare's Workflows binding.

`workflow.create(id=None, params=None)`, `create_batch([...])`, `get(id)`; an instance
has `id`, `status()`, `pause()`, `resume()`, `terminate()`, `restart()` and
`send_event(type=..., payload=...)` (also `sendEvent({"type", "payload"})`). Options may
come as keywords or as one dict, as code written for Cloudflare passes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .control import Control
from .values import AttrDict

_UNSET: Any = object()


def create_options(options: object, id: object, params: object) -> tuple[str | None, Any]:
    """`(id, params)` of a create call given a dict, keywords, or nothing."""
    if options is not None:
        if id is not _UNSET or params is not _UNSET:
            raise TypeError("pass the options as one dict or as keywords, not both")
        if not isinstance(options, Mapping):
            raise TypeError(f"create options must be a dict, got {type(options).__name__}")
        unknown = sorted(set(options) - {"id", "params"})
        if unknown:
            raise TypeError(f"unknown create option {unknown[0]!r} (options: id, params)")
        id, params = options.get("id"), options.get("params")
    chosen: Any = None if id is _UNSET else id
    return chosen, (None if params is _UNSET else params)


def event_options(options: object, type: object, payload: object) -> tuple[Any, Any]:
    """`(type, payload)` of a `send_event` call given a dict, keywords or positions."""
    if isinstance(options, Mapping):
        if type is not _UNSET or payload is not _UNSET:
            raise TypeError("pass the event as one dict or as type and payload, not both")
        unknown = sorted(set(options) - {"type", "payload"})
        if unknown:
            raise TypeError(f"unknown event field {unknown[0]!r} (fields: type, payload)")
        return options.get("type"), options.get("payload")
    if options is not None:
        if type is not _UNSET:
            raise TypeError("send_event got the type twice")
        type = options
    if type is _UNSET:
        raise TypeError("send_event needs the event type")
    return type, (None if payload is _UNSET else payload)


class WorkflowInstance:
    """One instance of a workflow of this object."""

    __slots__ = ("_control", "_workflow", "id")

    def __init__(self, control: Control, workflow: str, id: str) -> None:
        self._control = control
        self._workflow = workflow
        self.id = id

    def __repr__(self) -> str:
        return f"WorkflowInstance({self._workflow!r}, {self.id!r})"

    async def status(self) -> AttrDict:
        """``{"status", "error", "output"}``: `status` is one of queued, running, paused,
        errored, terminated, complete, waiting, waitingForPause (or unknown); `error` is
        ``{"name", "message"}`` or `None`; `output` is what `run` returned."""
        return self._control.status(self._workflow, self.id)

    async def pause(self) -> None:
        """Pause the instance (steps running now finish first)."""
        await self._control.pause(self._workflow, self.id)

    async def resume(self) -> None:
        """Resume a paused instance."""
        await self._control.resume(self._workflow, self.id)

    async def terminate(self) -> None:
        """Stop the instance for good; `WorkflowError` if it already ended."""
        await self._control.terminate(self._workflow, self.id)

    async def restart(self) -> None:
        """Run the instance again from the start (its journal and events are dropped)."""
        await self._control.restart(self._workflow, self.id)

    async def send_event(
        self, options: object = None, /, type: object = _UNSET, payload: object = _UNSET
    ) -> None:
        """Send an event for `wait_for_event`: ``send_event(type="paid", payload={...})``
        (or one dict ``{"type", "payload"}``)."""
        event_type, value = event_options(options, type, payload)
        await self._control.send_event(self._workflow, self.id, event_type, value)

    sendEvent = send_event


class Workflow:
    """A workflow of this object: creates and finds its instances."""

    __slots__ = ("_control", "name")

    def __init__(self, control: Control, name: str) -> None:
        self._control = control
        self.name = name

    def __repr__(self) -> str:
        return f"Workflow({self.name!r})"

    async def create(
        self, options: object = None, /, *, id: object = _UNSET, params: object = _UNSET
    ) -> WorkflowInstance:
        """Start a new instance: `id` (default: a random one) must be new to this
        workflow; `params` (a JSON value) becomes `event.payload`."""
        instance_id, values = create_options(options, id, params)
        if instance_id is not None and not isinstance(instance_id, str):
            raise TypeError(f"id must be a str, got {type(instance_id).__name__}")
        chosen = await self._control.create(self.name, instance_id, values)
        return WorkflowInstance(self._control, self.name, chosen)

    async def create_batch(self, batch: Sequence[Mapping[str, Any]]) -> list[WorkflowInstance]:
        """Start up to 100 instances at once (ids that exist already are kept as they are)."""
        if isinstance(batch, (str, bytes, Mapping)) or not isinstance(batch, Sequence):
            raise TypeError("create_batch takes a list of {id, params} dicts")
        items = [create_options(options, _UNSET, _UNSET) for options in batch]
        for instance_id, _ in items:
            if instance_id is not None and not isinstance(instance_id, str):
                raise TypeError(f"id must be a str, got {type(instance_id).__name__}")
        chosen = await self._control.create_batch(self.name, items)
        return [WorkflowInstance(self._control, self.name, found) for found in chosen]

    createBatch = create_batch

    async def get(self, id: str) -> WorkflowInstance:
        """The instance `id`; `WorkflowError` when there is none."""
        if not isinstance(id, str):
            raise TypeError(f"id must be a str, got {type(id).__name__}")
        self._control.row(self.name, id)
        return WorkflowInstance(self._control, self.name, id)
