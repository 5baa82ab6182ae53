"""What one attempt of a record needs (`ExecutionSpec`) and what a failed attempt becomes.

`decide_retry` applies the retry rules in a fixed order; the execution in
`execution.py` persists what it decides.
"""

from __future__ import annotations

import asyncio
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .._clock import now_ms
from .._context import SqlStorage
from .._errors import DurableRetryPolicyError, RetryAfter, is_non_retryable
from .._signal import AbortSignal
from .._types import MAX_SAFE_INTEGER
from .lifecycle import EVERY_EVENT_TYPE, Emit, EntityKind
from .policy import AttemptPolicy
from .tables import TableSpec

CompleteMany = Callable[
    [SqlStorage, Sequence[tuple["ExecutionSpec", int, Any]]], list["int | Exception | None"]
]
"""Stores successes `(spec, attempt, result)` at once; see `ExecutionSpec`."""


@dataclass(frozen=True, slots=True)
class SpecKind:
    """What every execution of one handler shares (built once per handler name); see
    `ExecutionSpec` for each field."""

    table: TableSpec
    label: str
    entity_kind: EntityKind
    name: str
    policy: AttemptPolicy
    emit: Emit
    exhausted_error: Callable[[], BaseException]
    timeout_error: Callable[[], BaseException]
    is_terminal: Callable[[BaseException], bool]
    include_result: bool = False
    listened: frozenset[str] = EVERY_EVENT_TYPE


class ExecutionSpec(ABC):
    """Everything that differs between an operation attempt and a named-alarm attempt.

    `attempt` is the attempt count the row had when it was read (the claim expects it);
    `invoke(attempt, signal)` calls the handler (its result may be awaitable);
    `complete(sql, result, attempt)` persists a success and returns its timestamp, or
    `None` when a newer generation won, and may raise to turn the success into a
    failure (it runs outside any transaction, so it must write with one statement);
    `is_terminal(error)` adds a kind-specific terminal rule. `listened` names the event
    types the lifecycle hook receives: events of other types are never built. `after`,
    when given, is awaited before anything else: the settlement of an older execution
    of the key that this one must not overlap. `on_terminal(sql)`, when given, writes
    in the transaction that records a terminal failure (a recurrence moves on there).
    `complete_many(sql, done)`, when given, stores many successes `(spec, attempt,
    result)` of one kind at once (the `complete` of each, set-based): per row its
    completion time, `None`, or the error that turns it into a failure.

    A subclass defines `invoke` and `complete` from what it holds of the record
    (`CallbackSpec`: two functions).
    """

    __slots__ = (
        "after",
        "attempt",
        "complete_many",
        "created_at",
        "emit",
        "entity_kind",
        "exhausted_error",
        "generation",
        "include_result",
        "is_terminal",
        "key",
        "label",
        "listened",
        "name",
        "on_terminal",
        "policy",
        "table",
        "timeout_error",
    )

    table: TableSpec
    key: str
    generation: str
    created_at: int
    attempt: int
    label: str
    entity_kind: EntityKind
    name: str
    policy: AttemptPolicy
    emit: Emit
    exhausted_error: Callable[[], BaseException]
    timeout_error: Callable[[], BaseException]
    is_terminal: Callable[[BaseException], bool]
    include_result: bool
    listened: frozenset[str]
    after: asyncio.Event | None
    on_terminal: Callable[[SqlStorage], None] | None
    complete_many: CompleteMany | None

    def __init__(
        self,
        kind: SpecKind,
        key: str,
        generation: str,
        created_at: int,
        attempt: int,
        after: asyncio.Event | None = None,
        on_terminal: Callable[[SqlStorage], None] | None = None,
        complete_many: CompleteMany | None = None,
    ) -> None:
        # One is built per attempt: plain stores of the kind's fields cost a fraction of
        # a generated keyword-only constructor.
        self.table = kind.table
        self.label = kind.label
        self.entity_kind = kind.entity_kind
        self.name = kind.name
        self.policy = kind.policy
        self.emit = kind.emit
        self.exhausted_error = kind.exhausted_error
        self.timeout_error = kind.timeout_error
        self.is_terminal = kind.is_terminal
        self.include_result = kind.include_result
        self.listened = kind.listened
        self.key = key
        self.generation = generation
        self.created_at = created_at
        self.attempt = attempt
        self.after = after
        self.on_terminal = on_terminal
        self.complete_many = complete_many

    @abstractmethod
    def invoke(self, attempt: int, signal: AbortSignal) -> Any:
        """Call the handler for attempt `attempt` (the result may be awaitable)."""

    @abstractmethod
    def complete(self, sql: SqlStorage, result: Any, attempt: int) -> int | None:
        """Persist a success with one statement: its timestamp, or `None` when a newer
        generation won."""

    def entity(self) -> dict[str, Any]:
        """The entity fields every lifecycle event of this record carries."""
        fields: dict[str, Any] = {
            "entity_kind": self.entity_kind,
            "id": self.key,
            "generation": self.generation,
        }
        fields["operation" if self.entity_kind == "operation" else "alarm"] = self.name
        return fields


class CallbackSpec(ExecutionSpec):
    """An execution whose handler call and success write are functions given with it
    (named alarms: no older attempt to wait for, each success written alone)."""

    __slots__ = ("_complete", "_invoke")

    def __init__(
        self,
        kind: SpecKind,
        key: str,
        generation: str,
        created_at: int,
        attempt: int,
        invoke: Callable[[int, AbortSignal], Any],
        complete: Callable[[SqlStorage, Any, int], int | None],
        on_terminal: Callable[[SqlStorage], None] | None = None,
    ) -> None:
        super().__init__(kind, key, generation, created_at, attempt, None, on_terminal)
        self._invoke = invoke
        self._complete = complete

    def invoke(self, attempt: int, signal: AbortSignal) -> Any:
        return self._invoke(attempt, signal)

    def complete(self, sql: SqlStorage, result: Any, attempt: int) -> int | None:
        return self._complete(sql, result, attempt)


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """What a failed attempt becomes: the error to store, terminal or not, and when next."""

    error: BaseException
    terminal: bool
    timestamp: int
    next_attempt_at: int


def decide_retry(spec: ExecutionSpec, attempt: int, error: BaseException) -> RetryDecision:
    """Apply the retry rules in order: non-retryable (by class, name or the policy's
    `non_retryable`), attempt limit, kind rule, then the delay a `RetryAfter` asked for
    or else the policy's."""
    if (
        is_non_retryable(error)
        or isinstance(error, spec.policy.non_retryable)
        or attempt >= spec.policy.max_attempts
        or spec.is_terminal(error)
    ):
        timestamp = now_ms()
        return RetryDecision(error, True, timestamp, timestamp)
    try:
        raw = error.delay_ms if isinstance(error, RetryAfter) else spec.policy.delay(attempt)
        if (
            isinstance(raw, bool)
            or not isinstance(raw, (int, float))
            or not math.isfinite(raw)
            or raw < 0
        ):
            raise DurableRetryPolicyError(spec.label)
        delay = math.floor(raw + 0.5)
        timestamp = now_ms()
        if delay > MAX_SAFE_INTEGER or timestamp + delay > MAX_SAFE_INTEGER:
            raise DurableRetryPolicyError(spec.label)
        return RetryDecision(error, False, timestamp, timestamp + delay)
    except Exception as policy_error:
        if isinstance(policy_error, DurableRetryPolicyError):
            terminal_error = policy_error
        else:
            terminal_error = DurableRetryPolicyError(spec.label)
            terminal_error.__cause__ = policy_error
        timestamp = now_ms()
        return RetryDecision(terminal_error, True, timestamp, timestamp)
