"""What each capability contributes to `durability check`, through one small interface.

A `Capability` reads its stored pending items from an object's tables, finds the
handlers the new code declares for it on a freshly built object, and says why an item
no longer fits its handler. `CAPABILITIES` lists them: a new capability is one more
class and one more entry, and the check does the rest (a missing handler, a handler
that no longer fits, a namespace no longer bound).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from ..._alarms.alarms import DurabilityAlarms
from ..._fanout.fanout import DurabilityFanout
from ..._operations.durability import Durability
from ..._serialization import deserialize
from ..._workflows.helper import DurabilityWorkflows
from .._inspect.tables import Tables
from .findings import UNKNOWN, Pending
from .payloads import declared_payload, mismatch, signature_problem

Problem = tuple[str, str]
"""A finding's kind (`signature_mismatch`, `payload_mismatch`) and its detail."""


class Capability(Protocol):
    """One capability's part of the check."""

    def declared(self, obj: object) -> Mapping[str, Any] | None:
        """What the new code's object `obj` declares for this capability, by handler (or
        target) name; `None` when the object does not use the capability at all."""
        ...

    def pending(self, tables: Tables) -> Iterable[Pending]:
        """The object's stored items still to run (nothing when its tables are absent)."""
        ...

    def problem(self, handler: Any, item: Pending) -> Problem | None:
        """Why `item` no longer fits `handler`: its signature, or its declared payload."""
        ...


def helpers_of(obj: object, kind: type) -> list[Any]:
    """The helpers of `kind` an object holds in its attributes."""
    try:
        values = vars(obj).values()
    except TypeError:
        return []
    return [value for value in values if isinstance(value, kind)]


def _payload(text: object) -> Any:
    if text is None:
        return UNKNOWN
    try:
        return deserialize(str(text))
    except ValueError:
        return UNKNOWN


class Operations:
    """Durable operations: each pending record needs its operation's handler."""

    def declared(self, obj: object) -> Mapping[str, Any] | None:
        found = helpers_of(obj, Durability)
        if not found:
            return None
        return {name: handler for helper in found for name, handler in helper._handlers.items()}

    def pending(self, tables: Tables) -> Iterable[Pending]:
        if not tables.has("durability_calls"):
            return []
        return [
            Pending("operation", str(row["operation"]), str(row["id"]), _payload(row["payload"]))
            for row in tables.rows(
                "SELECT id, operation, payload FROM durability_calls WHERE status = 'pending' "
                "ORDER BY id"
            )
        ]

    def problem(self, handler: Any, item: Pending) -> Problem | None:
        problem = signature_problem(handler)
        if problem is not None:
            return "signature_mismatch", problem
        if item.payload is UNKNOWN:
            return None
        problem = mismatch(item.payload, declared_payload(handler))
        return None if problem is None else ("payload_mismatch", problem)


class NamedAlarms:
    """Named alarms and recurrences: each pending one needs its handler."""

    def declared(self, obj: object) -> Mapping[str, Any] | None:
        found = helpers_of(obj, DurabilityAlarms)
        if not found:
            return None
        return {name: handler for helper in found for name, handler in helper._handlers.items()}

    def pending(self, tables: Tables) -> Iterable[Pending]:
        if not tables.has("durability_alarms"):
            return []
        columns = {row["name"] for row in tables.rows("PRAGMA table_info(durability_alarms)")}
        recurrence = "recurrence_kind" if "recurrence_kind" in columns else "NULL"
        payload = "payload" if "payload" in columns else "NULL"
        return [
            Pending(
                "recurrence" if row["recurrence"] is not None else "named alarm",
                str(row["name"]),
                str(row["name"]),
                _payload(row["payload"]),
            )
            for row in tables.rows(
                f"SELECT name, {recurrence} AS recurrence, {payload} AS payload "
                "FROM durability_alarms WHERE status = 'pending' ORDER BY name"
            )
        ]

    def problem(self, handler: Any, item: Pending) -> Problem | None:
        problem = signature_problem(handler)
        return None if problem is None else ("signature_mismatch", problem)


class Fanout:
    """Fanout deliveries: each needs its target (a dead-letter write needs only the DLQ)."""

    def declared(self, obj: object) -> Mapping[str, Any] | None:
        found = helpers_of(obj, DurabilityFanout)
        if not found:
            return None
        return {name: target for helper in found for name, target in helper._targets.items()}

    def pending(self, tables: Tables) -> Iterable[Pending]:
        if not tables.has("durability_fanout_deliveries", "durability_fanout_messages"):
            return []
        return [
            Pending(
                "fanout delivery",
                str(row["target_id"]),
                str(row["message_id"]),
                _payload(row["payload"]),
            )
            for row in tables.rows(
                "SELECT d.target_id, m.id AS message_id, m.payload "
                "FROM durability_fanout_deliveries AS d "
                "JOIN durability_fanout_messages AS m ON m.key = d.message_key "
                "WHERE d.phase = 'delivery' ORDER BY d.target_id, d.seq"
            )
        ]

    def problem(self, handler: Any, item: Pending) -> Problem | None:
        write = handler.deliver if handler.deliver is not None else handler.storage
        problem = None if write is None else signature_problem(write)
        return None if problem is None else ("signature_mismatch", problem)


class Workflows:
    """Workflow instances not yet done (running, sleeping, waiting for an event, paused):
    each needs its workflow's code, which the engine calls as `run(event, step)`."""

    def declared(self, obj: object) -> Mapping[str, Any] | None:
        found = helpers_of(obj, DurabilityWorkflows)
        if not found:
            return None
        return {name: code for helper in found for name, code in helper._code.items()}

    def pending(self, tables: Tables) -> Iterable[Pending]:
        if not tables.has("durability_workflow_instances"):
            return []
        return [
            Pending(
                "workflow instance",
                str(row["workflow"]),
                str(row["instance_id"]),
                _payload(row["params"]),
            )
            for row in tables.rows(
                "SELECT workflow, instance_id, params FROM durability_workflow_instances "
                "WHERE status <> 'done' ORDER BY workflow, instance_id"
            )
        ]

    def problem(self, handler: Any, item: Pending) -> Problem | None:
        problem = signature_problem(handler, arguments=2)
        return None if problem is None else ("signature_mismatch", problem)


CAPABILITIES: tuple[Capability, ...] = (Operations(), NamedAlarms(), Fanout(), Workflows())
"""Every capability the check asks, in report order."""
