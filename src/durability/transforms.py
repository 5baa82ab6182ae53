"""Call transforms: typed middleware around calls to objects and services.

A transform has a caller side (runs in the caller, around `stub.method(...)`, attached
with `create_transform_stub(stub).with_(transform, options)`) and/or a callee side
(runs in the object, installed with `apply_transforms(Class, all=[...])`). Caller
transforms can add context; it reaches the callee's transforms through the object's
`set_context(context, method, args)` RPC method. Context is untrusted caller metadata.

Built in: `timeout` (`CallerTimeoutError`), `retry` (sequential, jittered, in memory
only), `error_boundary` and `abort_as_success` (results as `Ok`/`Err`).
"""

from __future__ import annotations

from ._errors import CallerTimeoutError
from ._transforms import (
    CalleeCall,
    CallerCall,
    Err,
    Ok,
    RegisteredTransform,
    RetryAttempt,
    Transform,
    TransformContextTarget,
    TransformNamespace,
    TransformStub,
    abort_as_success,
    apply_transforms,
    create_transform_context_target,
    create_transform_stub,
    define_transform,
    error_boundary,
    register_transform,
    retry,
    timeout,
    with_transforms,
)

__all__ = [
    "CalleeCall",
    "CallerCall",
    "CallerTimeoutError",
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
