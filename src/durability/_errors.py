"""Every exception durability raises, and how thrown values are reduced for storage.

The tree (catch at the level you need)::

    DurabilityError
    ├── NonRetryableError                  raise from a handler to fail at once
    ├── DurableAttemptTimeoutError         an operation attempt ran out of time
    ├── DurableAlarmTimeoutError           a named-alarm attempt ran out of time
    ├── DurableRetryPolicyError            a retry policy produced an unusable delay
    ├── DurableResultSerializationError    a handler returned a non-JSON value
    ├── DurableAttemptsExhaustedError      a row was already at its attempt limit
    ├── DuplicateDurableCallError          an id belongs to another operation
    ├── LogAppendError                     a definite log input rejection
    ├── LogTruncatedError                  an offset is no longer retained
    ├── LogLeaseError                      a lease batch is not held
    ├── FanoutEnqueueError                 a definite fanout input rejection
    ├── FanoutSettlementError              a delivery was already settled or is stale
    ├── FanoutTimeoutError                 a fanout delivery ran out of time
    ├── RoutingError                       an invalid shard or routing target
    ├── DurableCancelledError              a record was cancelled while it ran
    ├── RetryAfter                         raise from a handler to retry after a delay
    └── CallerTimeoutError                 a caller-side `timeout` transform expired
                                           (also a `TimeoutError`)

Stored errors are reduced to `SerializedError(name, message, stack)` by
`serialize_error`, which never raises. A `__cause__` is never stored as an error of its
own; it only shows in the formatted `stack`.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass

from ._validate import check_non_negative_int

MAX_STACK_BYTES = 8192
"""The most UTF-8 bytes of formatted traceback kept with a stored error."""

_STACK_CUT = "[...]\n"
"""What replaces the start of a traceback cut to `MAX_STACK_BYTES`."""


@dataclass(frozen=True, init=False)
class SerializedError:
    """An error as it is persisted: its class name, its message and, if known, its traceback.

    `stack` is the formatted traceback (at most 8 KB, keeping its end, which holds the
    raise site), or `None` for an error that was never raised or was stored without
    one. It is diagnostic, kept beside the two fields rather than as a third: equality,
    `repr` and `dataclasses.asdict` see `name` and `message` only, as they always did.
    """

    name: str
    message: str

    def __init__(self, name: str, message: str, stack: str | None = None) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "_stack", stack)

    @property
    def stack(self) -> str | None:
        """The formatted traceback of the error, or `None` when there is none."""
        stack: str | None = self.__dict__.get("_stack")
        return stack


class DurabilityError(Exception):
    """Base class of every durability error."""


class NonRetryableError(DurabilityError):
    """Raise from a handler to fail the call at once, without further attempts."""


class DurableAttemptTimeoutError(DurabilityError):
    """An operation attempt exceeded its `attempt_timeout_ms`; retried by policy."""

    def __init__(self, operation: str, timeout_ms: int) -> None:
        super().__init__(f'Durable operation "{operation}" timed out after {timeout_ms}ms')
        self.operation = operation
        self.timeout_ms = timeout_ms


class DurableAlarmTimeoutError(DurabilityError):
    """A named-alarm attempt exceeded its timeout; terminal unless `retry_timeouts`."""

    def __init__(self, name: str, timeout_ms: int) -> None:
        super().__init__(f'Durable alarm "{name}" timed out after {timeout_ms}ms')
        self.alarm_name = name
        self.timeout_ms = timeout_ms


class DurableRetryPolicyError(DurabilityError):
    """A retry policy raised or returned a delay that is not a usable time."""

    def __init__(self, entity: str) -> None:
        super().__init__(
            f"Retry policy for {entity} must produce a non-negative safe-integer timestamp"
        )
        self.entity = entity


class DurableResultSerializationError(DurabilityError):
    """A handler returned a value that is not JSON; terminal, the handler is not rerun."""

    def __init__(self, operation: str) -> None:
        super().__init__(f'Result for durable operation "{operation}" is not JSON-serializable')
        self.operation = operation


class DurableAttemptsExhaustedError(DurabilityError):
    """A pending row was already at its attempt limit when it was claimed.

    `interruptions` counts its attempts that never settled (the process stopped or the
    object was evicted while they ran); when the last one ran alone and was interrupted
    too, the record is a poison: it failed by taking its process down, not by raising.
    """

    def __init__(self, entity: str, name: str, max_attempts: int, interruptions: int = 0) -> None:
        message = f'Durable {entity} "{name}" exhausted its {max_attempts} attempts'
        if interruptions:
            message += (
                f" ({interruptions} interrupted: the process stopped or the object was "
                "evicted while its handler ran)"
            )
        super().__init__(message)
        self.entity = entity
        self.entity_name = name
        self.max_attempts = max_attempts
        self.interruptions = interruptions


class DuplicateDurableCallError(DurabilityError):
    """An id is already used by another operation; ids belong to one operation forever."""

    def __init__(self, id: str, existing_operation: str, requested_operation: str) -> None:
        super().__init__(
            f'Durable call "{id}" already belongs to operation "{existing_operation}", '
            f'not "{requested_operation}"'
        )
        self.id = id
        self.existing_operation = existing_operation
        self.requested_operation = requested_operation


class LogAppendError(DurabilityError):
    """A definite log input rejection (bad batch, offset or consumer name)."""


class LogTruncatedError(DurabilityError):
    """The requested offset was trimmed (or its cold segment is gone)."""

    def __init__(self, requested_offset: int, oldest_offset: int) -> None:
        super().__init__(
            f"Log offset {requested_offset} was trimmed; "
            f"the oldest retained offset is {oldest_offset}"
        )
        self.requested_offset = requested_offset
        self.oldest_offset = oldest_offset


class LogLeaseError(DurabilityError):
    """An ack or nack named a batch that is unknown, fenced or already settled."""

    def __init__(self, batch_id: str) -> None:
        super().__init__(f'Log lease "{batch_id}" is not held')
        self.batch_id = batch_id


class FanoutEnqueueError(DurabilityError):
    """A definite fanout input rejection; returned in `EnqueueResult`, never raised."""


class FanoutSettlementError(DurabilityError):
    """A delivery was settled twice, or changed underneath its settlement."""

    def __init__(self, id: str, outcome: str | None = None) -> None:
        if outcome is None:
            message = f'Fanout delivery "{id}" is stale'
        else:
            message = f'Fanout delivery "{id}" was already settled as "{outcome}"'
        super().__init__(message)
        self.id = id
        self.outcome = outcome


class FanoutTimeoutError(DurabilityError):
    """A fanout target batch or dead-letter write exceeded its deadline."""

    def __init__(self, timeout_ms: int) -> None:
        super().__init__(f"Fanout delivery timed out after {timeout_ms}ms")
        self.timeout_ms = timeout_ms


class RoutingError(DurabilityError):
    """An invalid shard, an unresolvable namespace or an unknown routing method."""


class DurableCancelledError(DurabilityError):
    """The reason a running handler's signal is aborted when its record is cancelled:
    an operation's call (`operation`, `id`) or a named alarm's occurrence (`alarm`)."""

    def __init__(
        self, operation: str | None = None, id: str | None = None, *, alarm: str | None = None
    ) -> None:
        if alarm is None:
            message = f'Durable operation "{operation}" call "{id}" was cancelled'
        else:
            message = f'Durable named alarm "{alarm}" was cancelled'
        super().__init__(message)
        self.operation = operation
        self.id = id
        self.alarm = alarm


class RetryAfter(DurabilityError):
    """Raise from a handler to fail this attempt and make the next one due in `delay_ms`.

    The attempt counts like any failure, so `max_attempts` still bounds the record.
    """

    def __init__(self, delay_ms: int) -> None:
        check_non_negative_int("delay_ms", delay_ms)
        super().__init__(f"Retry requested after {delay_ms}ms")
        self.delay_ms = delay_ms


class CallerTimeoutError(DurabilityError, TimeoutError):
    """The caller-side `timeout` transform expired; the remote call was not cancelled."""

    def __init__(self, method: str, timeout_ms: float) -> None:
        super().__init__(f"RPC call to {method} timed out after {timeout_ms}ms")
        self.method = method
        self.timeout_ms = timeout_ms


def serialize_error(value: object) -> SerializedError:
    """Reduce any thrown value to `SerializedError`; never raises."""
    if value is None:
        return SerializedError("Error", "null")
    if not isinstance(value, BaseException):
        try:
            return SerializedError("Error", str(value))
        except Exception:
            return SerializedError("Error", "Unknown thrown value")
    try:
        name = type(value).__name__ or "Error"
    except Exception:
        name = "Error"
    try:
        message = str(value)
    except Exception:
        message = ""
    return SerializedError(name, message or "Unknown thrown value", format_stack(value))


def format_stack(error: BaseException) -> str | None:
    """`error`'s formatted traceback cut to `MAX_STACK_BYTES`, or `None` if it has none.

    An error that was never raised but has a raised cause (a wrapped failure) still
    gets the chain. The cut keeps the end: the innermost frames and the error line.
    """
    try:
        if error.__traceback__ is None and error.__cause__ is None and error.__context__ is None:
            return None
        text = "".join(traceback.format_exception(error))
    except Exception:
        return None
    encoded = text.encode("utf-8", "replace")
    if len(encoded) <= MAX_STACK_BYTES:
        return text
    room = MAX_STACK_BYTES - len(_STACK_CUT)
    return _STACK_CUT + encoded[-room:].decode("utf-8", "ignore")


def is_non_retryable(error: object) -> bool:
    """True for our `NonRetryableError` and for any class of that name (by class or name)."""
    if isinstance(error, NonRetryableError):
        return True
    try:
        return any(cls.__name__ == "NonRetryableError" for cls in type(error).__mro__) or (
            getattr(error, "name", None) == "NonRetryableError"
        )
    except Exception:
        return False
