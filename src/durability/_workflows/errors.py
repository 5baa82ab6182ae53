"""The errors of workflows: instance API misuse, timeouts, failed steps, replay divergence."""

from __future__ import annotations

from .._errors import DurabilityError


class WorkflowError(DurabilityError):
    """A workflow instance call that cannot be done: a bad or reused id, an unknown
    instance, a terminal instance asked to terminate or to receive an event."""


class WorkflowTimeoutError(DurabilityError):
    """A step attempt ran past its `timeout`, or `wait_for_event` past its own.

    `name` is ``"WorkflowTimeoutError"``, as code written for Cloudflare reads it."""

    name = "WorkflowTimeoutError"

    def __init__(self, timeout_ms: int) -> None:
        super().__init__(f"Execution timed out after {timeout_ms}ms")
        self.timeout_ms = timeout_ms


class WorkflowStepError(DurabilityError):
    """What `await` on a step raises once the step failed for good (its retries are
    spent): the last attempt's error, as it is stored.

    `step` is the step's name, `name` and `message` the class name and message of the
    error the step raised. A replay raises the same stored error, so `run` takes the
    same path on every replay."""

    def __init__(self, step: str, name: str, message: str) -> None:
        super().__init__(f'step "{step}" failed: {name}: {message}')
        self.step = step
        self.name = name
        self.message = message


class WorkflowDeterminismError(DurabilityError):
    """A run asked for steps its journal cannot answer: a step name used twice in one
    run, or new steps where the journal holds steps this run never reached (the code
    changed in a way a replay cannot follow). The instance is errored with it."""
