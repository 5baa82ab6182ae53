"""The engine layer: `DurabilityScheduler` and what capabilities build on.

Capabilities (operations, named alarms, the log, fanout) import from this package only. Its
modules, top-down: the scheduler handle and attachment (`scheduler`), the `Engine`
(`engine`) and its parts (`options`, `participants`, `reconcile`, `timer`, `permits`,
`registry`, `tasks`), one attempt (`execution`), attempts in batches (`batch`) and the
log records of attempts (`attempt_log`),
the fenced table SQL (`tables`), retry policies (`policy`), lifecycle events
(`lifecycle`), schema migrations (`migrations`) and the built-in schemas (`schemas`),
and the `DurableHelper` base (`helper`).
"""

from __future__ import annotations

from .._cloudflare import as_context
from .batch import start_batch
from .eager import EagerClaims
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
from .migrations import LATEST, Migration, MigrationResult, MigrationTarget, migrate
from .options import OPTION_NAMES, AlarmRetryInfo, SchedulerOptions, given_options
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
from .registry import ActiveExecution
from .scheduler import DurabilityScheduler, attach, attach_storage, object_scheduler
from .schemas import NAMED_ALARM_MIGRATIONS, OPERATION_MIGRATIONS
from .spec import CompleteMany, ExecutionSpec
from .stream_schemas import FANOUT_MIGRATIONS, LOG_LEASE_MIGRATIONS, LOG_MIGRATIONS
from .tables import (
    MAX_BATCH_ROWS,
    TableSpec,
    forget_stack,
    padded,
    padded_bindings,
    read_stack,
    value_rows,
)

__all__ = [
    "DEFAULT_ATTEMPT_TIMEOUT_MS",
    "FANOUT_MIGRATIONS",
    "LATEST",
    "LOG_LEASE_MIGRATIONS",
    "LOG_MIGRATIONS",
    "MAX_BATCH_ROWS",
    "NAMED_ALARM_MIGRATIONS",
    "OPERATION_MIGRATIONS",
    "OPTION_NAMES",
    "SHARED_EVENT_TYPES",
    "ActiveExecution",
    "AlarmMethodOptions",
    "AlarmRetryInfo",
    "AttemptPolicy",
    "AttemptSettledEvent",
    "AttemptStartedEvent",
    "CancelledEvent",
    "CompleteMany",
    "DurabilityScheduler",
    "DurableHelper",
    "EagerClaims",
    "Engine",
    "ExecutionSpec",
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
    "RegisteredEvent",
    "Release",
    "RetriedEvent",
    "RetryPolicy",
    "ScheduledEvent",
    "SchedulerOptions",
    "TableSpec",
    "TerminalEvent",
    "as_context",
    "attach",
    "attach_storage",
    "check_handlers",
    "exponential",
    "forget_stack",
    "given_options",
    "jitter",
    "listened_types",
    "migrate",
    "object_scheduler",
    "padded",
    "padded_bindings",
    "read_stack",
    "report_failure",
    "start_batch",
    "value_rows",
]
