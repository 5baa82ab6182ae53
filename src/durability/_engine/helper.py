"""`DurableHelper`: what `Durability` and `DurabilityAlarms` share.

Both validate their handlers, hook and policies the same way, attach to a scheduler,
migrate their own tables, register one participant, hand out one object per handler
name (also as an attribute), delegate `alarm()`, purge their table, and run their due
rows in one alarm-pass template through the engine's `AttemptRunner`. Each builds one
`Attempt` per record to run, of the `AttemptKind` of its handler name, whose executor
(the helper's own `Executor`, a private object: its methods must not become reserved
handler names) calls the handler and stores successes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from .._clock import now_ms
from .._context import Context, alarm_info, as_context
from .._errors import (
    DurableAlarmTimeoutError,
    DurableAttemptsExhaustedError,
    DurableAttemptTimeoutError,
    NonRetryableError,
    serialize_error,
)
from .._types import TimeInput
from .._validate import check_callable, to_epoch_ms
from .attempt import Attempt, AttemptKind
from .lifecycle import (
    EntityKind,
    LifecycleEventType,
    LifecycleHook,
    PurgedEvent,
    listened_types,
    report_failure,
)
from .migrations import LATEST, Migration, MigrationResult, MigrationTarget, migrate
from .participants import HostAlarmInfo, Participant
from .policy import AttemptPolicy, resolve_policies
from .records import RecordExecutor
from .running import ActiveExecution
from .scheduler import DurabilityScheduler, attach
from .schemas import ERROR_STACK_MIGRATIONS, STACKS_CAPABILITY
from .tables import TableSpec, due_rows

Entry = TypeVar("Entry")
Owner = TypeVar("Owner")

DUE_BATCH = 100
"""How many due rows of one table an alarm pass reads and runs."""

_SUSPECT = frozenset({0, 1})
"""The `claim_alone` of a row whose claimed attempt ran, beside others or alone, and
never settled."""


class HandlerEntry(Generic[Owner]):
    """What `helper.<name>` returns for handler `name`: calls go to the owning helper."""

    __slots__ = ("_owner", "name")

    def __init__(self, owner: Owner, name: str) -> None:
        self._owner = owner
        self.name = name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class DurableHelper(ABC, Generic[Entry]):
    """The shared body of a helper whose handlers are looked up by name.

    A subclass names its table, schema, entity kind and messages in class attributes,
    builds its per-name object in `_new_entry`, and keeps its own public constructor.
    Only `alarm`, `purge_before` and `migrate` are public here: with the subclass's own
    public names they are the handler names the subclass reserves.
    """

    _kind: ClassVar[str]
    _capability: ClassVar[str]
    _migrations: ClassVar[Sequence[Migration]]
    _table: ClassVar[TableSpec]
    _entity_kind: ClassVar[EntityKind]
    _noun: ClassVar[str]
    """How errors and labels name one record's kind (``operation``, ``named alarm``)."""
    _missing: ClassVar[str]
    """The message for an unknown handler name, with one ``{}`` for the name."""
    _purge_reason: ClassVar[str]
    _timeout_error: ClassVar[type[DurableAttemptTimeoutError] | type[DurableAlarmTimeoutError]]
    _due_columns: ClassVar[str]
    """The columns `_due_attempt` reads from a due row: the key and generation first,
    `claim_alone` and `interruptions` last."""
    _emitted: ClassVar[frozenset[str]]
    """The lifecycle event types this helper emits."""
    _one_per_key: ClassVar[bool]
    """True: a key runs one handler at a time, whatever the generation (named alarms).
    False: a new generation of a key (purged and added again) may overlap the old one."""

    def __init__(
        self,
        handlers: dict[str, Callable[..., Any]],
        *,
        scheduler: DurabilityScheduler | None,
        context: Context | None,
        attempt_timeout_ms: object,
        retries: object,
        methods: Mapping[str, Any] | None,
        options_type: type[Any],
        on_lifecycle_event: LifecycleHook | None,
        lifecycle_events: object = None,
        include_result_in_events: bool = False,
        options: Mapping[str, Any],
    ) -> None:
        self._handlers = handlers
        if on_lifecycle_event is not None:
            check_callable("on_lifecycle_event", on_lifecycle_event)
        self._listened = listened_types(on_lifecycle_event, lifecycle_events, self._emitted)
        """The event types the hook receives: no other event is built."""
        self._default_policy, self._policies = resolve_policies(
            attempt_timeout_ms=attempt_timeout_ms,
            retries=retries,
            methods=methods,
            options_type=options_type,
        )
        if not isinstance(include_result_in_events, bool):
            raise TypeError("include_result_in_events must be a bool")
        self._include_result = include_result_in_events
        self._engine = attach(
            scheduler=scheduler, context=context, kind=self._kind, options=options
        )
        self._emit = self._engine.tasks.emitter(on_lifecycle_event)
        self._active = self._engine.running.of(self._table.name)
        self._entries: dict[str, Entry] = {}
        self._kinds: dict[str, AttemptKind] = {}
        self._executor = self._new_executor()
        self._engine.migrate_schema(STACKS_CAPABILITY, ERROR_STACK_MIGRATIONS)
        self._engine.migrate_schema(self._capability, self._migrations)
        self._engine.register(Participant(self._table, self._run_due))

    # -- public surface -----------------------------------------------------------------

    def __getattr__(self, name: str) -> Entry:
        if name.startswith("_") or name not in self.__dict__.get("_handlers", {}):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        found = self._entry(name)
        # Later accesses find it as a plain attribute (handler names never shadow methods).
        self.__dict__[name] = found
        return found

    async def alarm(self, info: HostAlarmInfo | None = None) -> None:
        """Run due work of every helper on this helper's scheduler (the object's alarm)."""
        await self._engine.alarm(alarm_info(info))

    async def purge_before(
        self, ms: TimeInput | None = None, *, before: TimeInput | None = None
    ) -> int:
        """Delete every record created strictly before the cutoff (any status); the count.

        The cutoff is `ms` (epoch milliseconds or an aware datetime); `before=` is its
        other name. Running handlers of purged records are aborted best-effort; their
        keys are reusable at once and late settlements of the old records are ignored.
        """
        cutoff = _purge_cutoff(ms, before)
        count = await self._engine.purge(self._table, cutoff, self._purge_reason)
        if LifecycleEventType.PURGED in self._listened:
            self._emit(
                PurgedEvent(
                    entity_kind=self._entity_kind, timestamp=now_ms(), before=cutoff, count=count
                )
            )
        return count

    @classmethod
    def migrate(cls, context: Context, target: MigrationTarget = LATEST) -> MigrationResult:
        """Move this helper's schema to `target` (`LATEST`, a migration name, or `None`)."""
        return migrate(as_context(context).storage, cls._capability, cls._migrations, target)

    # -- internals ----------------------------------------------------------------------

    def _entry(self, name: str) -> Entry:
        """The one object of handler `name`; `ValueError` when no handler has that name."""
        found = self._entries.get(name)
        if found is None:
            if name not in self._handlers:
                raise ValueError(self._missing.format(name))
            found = self._entries[name] = self._new_entry(name)
        return found

    @abstractmethod
    def _new_entry(self, name: str) -> Entry:
        """A new object of handler `name` (called once per name)."""

    @abstractmethod
    def _new_executor(self) -> RecordExecutor:
        """The executor of this helper's records (called once, at construction)."""

    @abstractmethod
    def _due_attempt(self, row: tuple[Any, ...], info: HostAlarmInfo | None) -> Attempt:
        """The attempt of due `row` (the `_due_columns`, in order) in the pass of `info`."""

    async def _run_due(self, now: int, info: HostAlarmInfo | None) -> None:
        """Run this helper's due records: the participant callback of an alarm pass.

        A key already executing here is attached to: the pass waits for it at its end
        instead of running it again (with live timers it is skipped). Every due row is
        tried even when some fail; a failure (only storage can fail here: handler errors
        are settled into their rows) then fails the pass, which arms the fallback alarm,
        so the rows it could not settle run again.
        """
        skip_running = self._engine.options.live_timers
        attached: list[ActiveExecution] = []

        def running(row: tuple[Any, ...]) -> bool:
            found = self._active.get(row[0])
            if found is None or (not self._one_per_key and found.generation != row[1]):
                return False
            if not skip_running:
                attached.append(found)
            return True

        def attempt_of(row: tuple[Any, ...]) -> Attempt | None:
            return None if running(row) else self._due_attempt(row, info)

        table = self._table
        runner = self._engine.runner
        rows = due_rows(self._engine.sql, table, self._due_columns, now, DUE_BATCH)
        due = await self._catch_up([row for row in rows if not running(row)], now)
        # A row whose last attempt never settled is a suspect: it runs alone, after the
        # others, so a poison that takes the process down takes nothing else with it. (A
        # claim its insert made ahead of a permit is claimed again with the others.)
        suspects = [row for row in due if row[-2] in _SUSPECT]
        if suspects:
            due = [row for row in due if row[-2] not in _SUSPECT]
        failures = await runner.run(due, attempt_of, table=table.name)
        if suspects:
            failures += await runner.run_alone(suspects, attempt_of, table=table.name)
        for execution in attached:
            await execution.settled.wait()
        if not failures:
            return
        for key, error in failures[1:]:
            report_failure(
                "durability.background_execution.failed", {"table": table.name, "key": key}, error
            )
        raise failures[0][1]

    async def _catch_up(self, rows: list[tuple[Any, ...]], now: int) -> list[tuple[Any, ...]]:
        """The due `rows` to run at `now`; a subclass may move some of them first."""
        return rows

    @abstractmethod
    def _is_terminal(self, error: BaseException, policy: AttemptPolicy) -> bool:
        """Whether `error` fails the record at once, whatever attempts are left."""

    def _no_handler(self, name: str) -> NonRetryableError:
        """The error an attempt of handler `name` fails with when there is no such handler."""
        return NonRetryableError(self._missing.format(name))

    def _kind_of(self, name: str) -> AttemptKind:
        """What every attempt of handler `name` shares (built once per name)."""
        found = self._kinds.get(name)
        if found is not None:
            return found
        policy = self._policies.get(name, self._default_policy)
        kind = self._kinds[name] = AttemptKind(
            executor=self._executor,
            table=self._table,
            label=f'{self._noun} "{name}"',
            entity_kind=self._entity_kind,
            name=name,
            policy=policy,
            emit=self._emit,
            exhausted_error=lambda _, interruptions: serialize_error(
                DurableAttemptsExhaustedError(self._noun, name, policy.max_attempts, interruptions)
            ),
            timeout_error=lambda: self._timeout_error(name, policy.attempt_timeout_ms),
            include_result=self._include_result,
            listened=self._listened,
        )
        return kind


def _purge_cutoff(ms: TimeInput | None, before: TimeInput | None) -> int:
    """The epoch-ms cutoff of `purge_before`, given once as `ms` or as `before=`."""
    if before is None:
        if ms is None:
            raise TypeError("purge_before() needs the cutoff: purge_before(ms)")
        return to_epoch_ms("ms", ms)
    if ms is not None:
        raise TypeError("purge_before() takes the cutoff once: ms or before=, not both")
    return to_epoch_ms("before", before)
