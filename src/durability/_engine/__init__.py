"""The engine layer: `DurabilityScheduler` and what capabilities build on.

Capabilities (operations, named alarms, the log, fanout) import from this package only; its
modules are the scheduler and engine, the attempt execution, the fenced table SQL,
retry policies, lifecycle events, schema migrations and the `DurableHelper` base.
"""

from __future__ import annotations

from .execution import ExecutionSpec, run_execution
from .helper import DurableHelper, HandlerEntry
from .lifecycle import (
    AttemptSettledEvent,
    AttemptStartedEvent,
    LifecycleEvent,
    PurgedEvent,
    RegisteredEvent,
    ScheduledEvent,
    TerminalEvent,
    report_failure,
)
from .migrations import (
    FANOUT_MIGRATIONS,
    LATEST,
    LOG_LEASE_MIGRATIONS,
    LOG_MIGRATIONS,
    NAMED_ALARM_MIGRATIONS,
    OPERATION_MIGRATIONS,
    MigrationResult,
    migrate,
)
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
from .scheduler import (
    ActiveExecution,
    AlarmInvocationInfo,
    AlarmRetryInfo,
    DurabilityScheduler,
    Participant,
    Release,
    attach,
    given_options,
)
from .tables import TableSpec, due_rows, new_generation

__all__ = [
    "DEFAULT_ATTEMPT_TIMEOUT_MS",
    "FANOUT_MIGRATIONS",
    "LATEST",
    "LOG_LEASE_MIGRATIONS",
    "LOG_MIGRATIONS",
    "NAMED_ALARM_MIGRATIONS",
    "OPERATION_MIGRATIONS",
    "ActiveExecution",
    "AlarmInvocationInfo",
    "AlarmMethodOptions",
    "AlarmRetryInfo",
    "AttemptPolicy",
    "AttemptSettledEvent",
    "AttemptStartedEvent",
    "DurabilityScheduler",
    "DurableHelper",
    "ExecutionSpec",
    "HandlerEntry",
    "LifecycleEvent",
    "MethodOptions",
    "MigrationResult",
    "Participant",
    "PurgedEvent",
    "RegisteredEvent",
    "Release",
    "RetryPolicy",
    "ScheduledEvent",
    "TableSpec",
    "TerminalEvent",
    "attach",
    "check_handlers",
    "due_rows",
    "exponential",
    "given_options",
    "jitter",
    "migrate",
    "new_generation",
    "report_failure",
    "run_execution",
]
