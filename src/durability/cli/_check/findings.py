"""What `durability check` reports: findings, and the stored work it looks at."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..._types import JsonValue

UNKNOWN: Any = object()
"""The payload of a stored item whose payload is not known (or not stored)."""


@dataclass(frozen=True, slots=True)
class Pending:
    """One stored item still to run: what it is (`"operation"`, `"named alarm"`,
    `"recurrence"`, `"fanout delivery"`, ...), the handler (or target) that must run it,
    its id, and its payload (`UNKNOWN` when none is stored)."""

    what: str
    handler: str
    id: str
    payload: Any = UNKNOWN


@dataclass(frozen=True, slots=True)
class Finding:
    """Something stored that the new code cannot run as it stands.

    `kind` is one of `missing_handler`, `signature_mismatch`, `payload_mismatch`,
    `unbound_namespace`, `constructor_failed`, `migration_refused`, `migration_reverts`,
    `objects_deleted`, `unreadable`; `what` the kind of item (an operation, a named alarm,
    a migration, ...); `object` the object's name (`None` when none is recorded) and
    `object_id` its id; `handler` the handler, target or capability concerned; `id` the
    item's id (an operation's id, an alarm's name, a migration's name); `detail` a
    sentence saying what is wrong.
    """

    kind: str
    what: str
    namespace: str
    object: str | None
    object_id: str
    handler: str
    id: str
    detail: str

    def to_json(self) -> dict[str, JsonValue]:
        return dict(asdict(self))
