"""Call transforms: caller- and callee-side middleware for object and service calls."""

from __future__ import annotations

from .builtin import Err, Ok, RetryAttempt, abort_as_success, error_boundary, retry, timeout
from .callee import (
    RegisteredTransform,
    TransformContextTarget,
    apply_transforms,
    create_transform_context_target,
    register_transform,
)
from .caller import TransformNamespace, TransformStub, create_transform_stub, with_transforms
from .define import CalleeCall, CallerCall, Transform, define_transform

__all__ = [
    "CalleeCall",
    "CallerCall",
    "Err",
    "Ok",
    "RegisteredTransform",
    "RetryAttempt",
    "Transform",
    "TransformContextTarget",
    "TransformNamespace",
    "TransformStub",
    "abort_as_success",
    "apply_transforms",
    "create_transform_context_target",
    "create_transform_stub",
    "define_transform",
    "error_boundary",
    "register_transform",
    "retry",
    "timeout",
    "with_transforms",
]
