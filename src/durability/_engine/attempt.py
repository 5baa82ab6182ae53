"""What one attempt needs: its item (`Attempt`), what every attempt of its kind shares
(`AttemptKind`), and what runs it (`Executor`).

An `Attempt` is plain data: the item's key, generation, creation time, the attempt
count it was read with, and the executor's own `data` (an operation's payload text, a
named alarm's row, a target's due deliveries, a workflow instance's row). Behaviour
lives in one place per capability, its `Executor`; the runner (`runner.py`,
`batch.py`) holds no capability knowledge beyond it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .._errors import SerializedError
from .lifecycle import EVERY_EVENT_TYPE, Emit
from .permits import Release, no_permit
from .policy import AttemptPolicy
from .running import ActiveExecution
from .tables import TableSpec

if TYPE_CHECKING:
    from .engine import Engine

Done = tuple["Attempt", int, Any]
"""A success to store: the attempt, its number (1-based) and the handler's result."""


class Executor(Protocol):
    """What runs the attempts of one kind of work: how their claim is written, what an
    attempt whose claim lost becomes, and how the claimed ones run (`RecordExecutor`
    for record tables, the fanout's for deliveries, the workflows' for instance runs)."""

    async def claim(
        self, engine: Engine, holds: list[Attempt], now: int, errors: list[Exception]
    ) -> set[str]:
        """Claim the held attempts (one write for the lot, durable once committed): the
        keys whose claim won. A write the storage refuses goes to `errors`."""
        ...

    async def lost(self, engine: Engine, attempt: Attempt) -> None:
        """`attempt`'s claim lost (its record moved on, or is out of attempts)."""
        ...

    async def run(
        self,
        engine: Engine,
        claimed: list[Attempt],
        started_at: int,
        waiting: list[asyncio.Task[None]],
    ) -> None:
        """Run the `claimed` attempts, whose claims are durable; one that goes on in a
        task of its own (which then owns its hold) is added to `waiting`."""
        ...


@dataclass(frozen=True, slots=True)
class AttemptKind:
    """What every attempt of one handler name shares (built once per name).

    `label` names the handler in errors (``operation "charge"``); `entity_kind` is the
    kind of item (``operation``, ``named_alarm``, ``fanout_delivery``,
    ``workflow_instance``); `listened` names the lifecycle event types the hook receives
    (events of other types are never built); `include_result` puts a success's result in
    its settled event; `exhausted_error(attempt, interruptions)` is the error an item
    out of attempts is stored with, given how many of its attempts were interrupted,
    and `timeout_error()` the error of an attempt past its timeout (either is `None`
    for a kind whose attempts are never out of attempts, or never time out: workflow
    runs, whose steps have their own).
    """

    executor: Executor
    table: TableSpec
    label: str
    entity_kind: str
    name: str
    policy: AttemptPolicy
    emit: Emit
    exhausted_error: Callable[[Attempt, int], SerializedError] | None = None
    timeout_error: Callable[[], BaseException] | None = None
    include_result: bool = False
    listened: frozenset[str] = EVERY_EVENT_TYPE


class Attempt(ActiveExecution):
    """One attempt to run of one record, and once held (`batch.take_hold`), its key lock
    and permit: the attempt's entry in the running table.

    `attempt` is the attempt count the row had when it was read (its claim expects it).
    `suspect` is `None`, or, for a row whose last claimed attempt never settled (the
    process stopped or the object was evicted while it ran), whether that attempt ran
    alone (1) or beside others (0): a suspect runs alone (see `tables.claim_suspect`).
    `interruptions` counts the attempts of the row that never settled, `spared` those of
    them that ran beside others (and so do not count toward the limit; for a suspect,
    its own interrupted attempt included). `after`, when
    given, is the settlement of an older execution of the key that this one must not
    overlap: nothing of this attempt starts before it is set. `data` is the executor's
    own (what its `invoke` and `complete` need of the record).

    Held, it has a `permit` (`no_permit` until it gets one, and once it handed its own
    on), runs `alone` when it holds every permit of the pool (nothing else of the
    scheduler then runs beside it), and is `released` once its permit and key are given
    back, or handed to a task that gives them back.
    """

    __slots__ = (
        "after",
        "alone",
        "attempt",
        "created_at",
        "data",
        "generation",
        "interruptions",
        "key",
        "kind",
        "permit",
        "released",
        "spared",
        "suspect",
    )

    permit: Release

    def __init__(
        self,
        kind: AttemptKind,
        key: str,
        generation: str,
        created_at: int,
        attempt: int,
        data: Any,
        after: asyncio.Event | None = None,
        suspect: int | None = None,
        interruptions: int = 0,
        spared: int = 0,
    ) -> None:
        self.kind = kind
        self.key = key
        self.generation = generation
        self.created_at = created_at
        self.attempt = attempt
        self.data = data
        self.after = after
        self.suspect = suspect
        self.interruptions = interruptions
        self.spared = spared if suspect != 0 else spared + 1
        # The hold's fields (see `batch.take_hold`) and `ActiveExecution`'s.
        self.permit = no_permit
        self.alone = False
        self.released = False
        self.signal = None
        self.is_settled = False
        self._event = None

    @property
    def counted(self) -> int:
        """How many attempts count toward the limit once this one is claimed."""
        return self.attempt + 1 - self.spared

    def entity(self) -> dict[str, Any]:
        """The entity fields every lifecycle event of this record carries."""
        kind = self.kind
        fields: dict[str, Any] = {
            "entity_kind": kind.entity_kind,
            "id": self.key,
            "generation": self.generation,
        }
        fields["operation" if kind.entity_kind == "operation" else "alarm"] = kind.name
        return fields
