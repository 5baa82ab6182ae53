"""What an operation handler receives (`DurableCall`), and how an attempt of an
operation record calls it and stores its success (`CallExecutor`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from urllib.parse import quote

from .._clock import now_ms
from .._context import SqlStorage
from .._engine import Attempt, AttemptKind, AttemptPolicy, Done, Engine, RecordExecutor
from .._errors import DurableResultSerializationError
from .._frozen import frozen_with
from .._serialization import deserialize
from .._signal import AbortSignal
from .._types import JsonValue
from .completions import complete_calls
from .control import NULL_TEXT, complete_call

if TYPE_CHECKING:
    from .durability import Durability

IDEMPOTENCY_PREFIX = "durability-call:v1:"

P = TypeVar("P")
"""The payload type a handler declares (`DurableCall[Order]`); unchecked at run time."""


@dataclass(frozen=True, kw_only=True)
class DurableCall(Generic[P]):
    """What an operation handler receives: the call's id, payload and attempt (1-based).

    `signal` is aborted when the attempt times out or the record is cancelled or purged.
    `idempotency_key` is the same for every attempt of this call and differs between
    objects: it holds the object's id, the operation and the call's id, so an external
    service given it applies the call's effect once. (Not slotted: `DurableCall[Order](...)`
    must be able to record its type argument.)
    """

    id: str
    operation: str
    payload: P
    attempt: int
    signal: AbortSignal
    idempotency_key: str


class CallExecutor(RecordExecutor):
    """Runs operation records: the handler gets a `DurableCall` of the stored payload;
    successes are stored set-based (`complete_calls`)."""

    __slots__ = ("_owner",)

    def __init__(self, owner: Durability) -> None:
        self._owner = owner

    def invoke(self, attempt: Attempt, number: int, signal: AbortSignal) -> Any:
        return self.invoker(attempt.kind)(attempt, number, signal)

    def invoker(self, kind: AttemptKind) -> Callable[[Attempt, int, AbortSignal], Any]:
        owner, name = self._owner, kind.name
        handler = owner._handlers.get(name)
        if handler is None:

            def missing(attempt: Attempt, number: int, signal: AbortSignal) -> Any:
                raise owner._no_handler(name)

            return missing
        prefix = owner._prefixes.get(name) or owner._idempotency_prefix(name)

        def invoke(attempt: Attempt, number: int, signal: AbortSignal) -> Any:
            text = attempt.data
            key = attempt.key
            call: DurableCall[JsonValue] = frozen_with(
                DurableCall,
                {
                    "id": key,
                    "operation": name,
                    "payload": None if text == NULL_TEXT else deserialize(text),
                    "attempt": number,
                    "signal": signal,
                    "idempotency_key": prefix + key,
                },
            )
            return handler(call)

        return invoke

    def complete(self, engine: Engine, done: Sequence[Done]) -> list[int | Exception | None]:
        if len(done) > 1:
            return complete_calls(engine, done, now_ms())
        attempt, number, result = done[0]
        try:
            return [
                complete_call(
                    engine.sql, attempt.kind.name, attempt.key, attempt.generation, result, number
                )
            ]
        except DurableResultSerializationError as error:
            return [error]

    def on_terminal(self, sql: SqlStorage, attempt: Attempt) -> None:
        """A failed call changes nothing beyond its own row."""

    def is_terminal(self, error: BaseException, policy: AttemptPolicy) -> bool:
        return self._owner._is_terminal(error, policy)


def call_idempotency_key(object_id: str | None, operation: str, id: str) -> str:
    """`durability-call:v1:<object id>:<operation>:<id>`, the operation name escaped so
    no two (operation, id) pairs give one key (the id, last, is kept as it is)."""
    return f"{IDEMPOTENCY_PREFIX}{object_id or ''}:{_escaped(operation)}:{id}"


@functools.lru_cache(maxsize=256)
def _escaped(operation: str) -> str:
    """`operation` percent-escaped for the idempotency key (a handler name: few distinct)."""
    return quote(operation, safe="")
