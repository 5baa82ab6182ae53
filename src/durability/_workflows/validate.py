"""The naming rules of workflows, instances, steps and events, as Cloudflare checks them."""

from __future__ import annotations

import re

from .._validate import check_utf8
from .errors import WorkflowError

_ID = re.compile(r"[a-zA-Z0-9_][a-zA-Z0-9_-]*")
MAX_ID_LENGTH = 100
MAX_WORKFLOW_NAME_LENGTH = 64
MAX_STEP_NAME_LENGTH = 256
MAX_EVENT_TYPE_LENGTH = 100
MAX_BATCH = 100


def check_workflow_name(name: object) -> str:
    """A workflow name: 1 to 64 letters, digits, `_` and `-`, not starting with `-`."""
    if not isinstance(name, str):
        raise TypeError(f"workflow names must be str, got {type(name).__name__}")
    if len(name) > MAX_WORKFLOW_NAME_LENGTH or _ID.fullmatch(name) is None:
        raise ValueError(
            f"workflow name {name!r} must be 1 to {MAX_WORKFLOW_NAME_LENGTH} letters, digits, "
            "'_' or '-', not starting with '-'"
        )
    return name


def check_instance_id(instance_id: object) -> str:
    """An instance id: 1 to 100 letters, digits, `_` and `-`, not starting with `-`
    (`WorkflowError` otherwise, as Cloudflare's binding raises)."""
    if not isinstance(instance_id, str):
        raise TypeError(f"id must be a str, got {type(instance_id).__name__}")
    if len(instance_id) > MAX_ID_LENGTH or _ID.fullmatch(instance_id) is None:
        raise WorkflowError(
            f"invalid workflow instance id {instance_id!r}: 1 to {MAX_ID_LENGTH} letters, "
            "digits, '_' or '-', not starting with '-'"
        )
    return instance_id


def check_step_name(name: object) -> str:
    """A step name: a str of 1 to 256 characters without control characters."""
    if not isinstance(name, str):
        raise TypeError(f"step names must be str, got {type(name).__name__}")
    check_utf8("step name", name)
    if not name or len(name) > MAX_STEP_NAME_LENGTH or any(ord(c) < 32 for c in name):
        raise ValueError(
            f"step name {name!r} must be 1 to {MAX_STEP_NAME_LENGTH} characters without "
            "control characters"
        )
    return name


def check_event_type(event_type: object) -> str:
    """An event type: 1 to 100 letters, digits, `_` and `-`, not starting with `-`."""
    if not isinstance(event_type, str):
        raise TypeError(f"event type must be a str, got {type(event_type).__name__}")
    if len(event_type) > MAX_EVENT_TYPE_LENGTH or _ID.fullmatch(event_type) is None:
        raise ValueError(
            f"event type {event_type!r} must be 1 to {MAX_EVENT_TYPE_LENGTH} letters, digits, "
            "'_' or '-', not starting with '-'"
        )
    return event_type
