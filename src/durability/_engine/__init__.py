"""The engine layer: `DurabilityScheduler` and what capabilities build on.

Capabilities (operations, named alarms, the log, fanout, workflows) import from this
package only. Its modules, top-down: the scheduler handle and attachment
(`scheduler`), the `Engine` (`engine`) and its parts (`options`, `participants`,
`reconcile`, `timer`, `permits`, `running`, `tasks`); what an attempt needs
(`attempt`), the one way attempts start, whatever their capability (`runner`, with
`batch` and `handler_task`), the outcomes of record attempts (`settle`, whose retry
delay the fanout uses too) and their log records (`attempt_log`); requests grouped
per loop turn (`turns`); the fenced table SQL (`tables`), retry policies (`policy`),
lifecycle events (`lifecycle`; the fanout's in `delivery_events`), schema migrations
(`migrations`) and the engine's own table (`schemas`); and the `DurableHelper` base
(`helper`).
"""

from __future__ import annotations

from .._context import as_context
from .attempt import Attempt, AttemptKind, Done, Executor
from .batch import hand_over, release
from .delivery_events import (
    DELIVERY_EVENT_TYPES,
    DeliveryRegisteredEvent,
    DeliverySettledEvent,
    DeliveryStartedEvent,
    DeliveryTerminalEvent,
)
from .engine import Engine
from .helper import DurableHelper, HandlerEntry
from .lifecycle import (
    SHARED_EVENT_TYPES,
    AttemptSettledEvent,
    AttemptStartedEvent,
    CancelledEvent,
    LifecycleEvent,
    LifecycleEventType,
    LifecycleHook,
    PurgedEvent,
    RegisteredEvent,
    RetriedEvent,
    ScheduledEvent,
    TerminalEvent,
    listened_types,
    report_failure,
)
from .migrations import (
    ALARMS_0004,
    CALLS_0004,
    LATEST,
    Migration,
    MigrationResult,
    MigrationTarget,
    migrate,
    migration_time_ms,
)
from .options import AlarmRetryInfo, SchedulerOptionArgs, SchedulerOptions, options_of
from .participants import HostAlarmInfo, Participant
from .permits import Release
from .policy import (
    DEFAULT_ATTEMPT_TIMEOUT_MS,
    AlarmMethodOptions,
    AttemptPolicy,
    MethodOptions,
    RetryPolicy,
    check_handlers,
    exponential,
    jitter,
)
from .records import RecordExecutor
from .reservation import QUEUED_CLAIM, Reservation
from .runner import AttemptRunner
from .running import ActiveExecution
from .scheduler import DurabilityScheduler, attach, attach_storage, object_scheduler
from .settle import retry_at
from .tables import (
    MAX_BATCH_ROWS,
    TableSpec,
    forget_stack,
    padded_bindings,
    read_stack,
    value_rows,
)
from .turns import TurnBatch

__all__ = [
    "ALARMS_0004",
    "CALLS_0004",
    "DEFAULT_ATTEMPT_TIMEOUT_MS",
    "DELIVERY_EVENT_TYPES",
    "LATEST",
    "MAX_BATCH_ROWS",
    "QUEUED_CLAIM",
    "SHARED_EVENT_TYPES",
    "ActiveExecution",
    "AlarmMethodOptions",
    "AlarmRetryInfo",
    "Attempt",
    "AttemptKind",
    "AttemptPolicy",
    "AttemptRunner",
    "AttemptSettledEvent",
    "AttemptStartedEvent",
    "CancelledEvent",
    "DeliveryRegisteredEvent",
    "DeliverySettledEvent",
    "DeliveryStartedEvent",
    "DeliveryTerminalEvent",
    "Done",
    "DurabilityScheduler",
    "DurableHelper",
    "Engine",
    "Executor",
    "HandlerEntry",
    "HostAlarmInfo",
    "LifecycleEvent",
    "LifecycleEventType",
    "LifecycleHook",
    "MethodOptions",
    "Migration",
    "MigrationResult",
    "MigrationTarget",
    "Participant",
    "PurgedEvent",
    "RecordExecutor",
    "RegisteredEvent",
    "Release",
    "Reservation",
    "RetriedEvent",
    "RetryPolicy",
    "ScheduledEvent",
    "SchedulerOptionArgs",
    "SchedulerOptions",
    "TableSpec",
    "TerminalEvent",
    "TurnBatch",
    "as_context",
    "attach",
    "attach_storage",
    "check_handlers",
    "exponential",
    "forget_stack",
    "hand_over",
    "jitter",
    "listened_types",
    "migrate",
    "migration_time_ms",
    "object_scheduler",
    "options_of",
    "padded_bindings",
    "read_stack",
    "release",
    "report_failure",
    "retry_at",
    "value_rows",
]
