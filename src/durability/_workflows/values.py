"""The values a workflow sees: its event, step contexts, step results and awaited events.

Cloudflare's Python SDK hands workflow code JavaScript objects converted to dicts that
also answer attribute access (`event.payload` and `event["payload"]`). `AttrDict` is
that dict here: step results and awaited events come back as JSON copies whose objects
are `AttrDict`s, the same on the first run and on every replay.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from .._serialization import deserialize
from .._types import JsonValue


class AttrDict(dict[str, Any]):
    """A dict whose keys also read as attributes (`d.key` is `d["key"]`)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def attr_copy(value: Any) -> Any:
    """A copy of a JSON value whose dicts are `AttrDict`s."""
    if isinstance(value, dict):
        return AttrDict((key, attr_copy(item)) for key, item in value.items())
    if isinstance(value, list):
        return [attr_copy(item) for item in value]
    return value


def decoded(text: str) -> Any:
    """The value of a stored envelope, its dicts as `AttrDict`s."""
    return attr_copy(deserialize(text))


def utc_datetime(ms: int) -> datetime:
    """Epoch milliseconds as an aware UTC datetime."""
    return datetime.fromtimestamp(ms / 1000, UTC)


class WorkflowEvent(AttrDict):
    """The event `run(event, step)` is called with.

    Keys as on Cloudflare: ``payload`` (the instance's params), ``timestamp`` (when the
    instance was created, an aware UTC datetime), ``instanceId`` and ``workflowName``;
    ``event.instance_id`` and ``event.workflow_name`` read the last two as well.
    """

    __slots__ = ()

    @property
    def instance_id(self) -> str:
        """The id of the instance running."""
        return str(self["instanceId"])

    @property
    def workflow_name(self) -> str:
        """The name of the workflow the instance belongs to."""
        return str(self["workflowName"])


def workflow_event(
    payload: JsonValue, created_at: int, instance_id: str, workflow: str
) -> WorkflowEvent:
    """The event of an instance; `payload` is decoded afresh for each run."""
    event = WorkflowEvent()
    event["payload"] = payload
    event["timestamp"] = utc_datetime(created_at)
    event["instanceId"] = instance_id
    event["workflowName"] = workflow
    return event


def received_event(stored: dict[str, Any]) -> AttrDict:
    """What `wait_for_event` returns from its stored form `{type, payload, timestamp}`."""
    received = AttrDict(stored)
    received["timestamp"] = utc_datetime(int(stored["timestamp"]))
    return received


def step_context(name: str, attempt: int, config: dict[str, Any]) -> AttrDict:
    """The `ctx` a step function may take: its name, the attempt (from 1), its config."""
    return AttrDict(
        step=AttrDict(name=name, count=1),
        attempt=attempt,
        config=attr_copy(config),
    )
