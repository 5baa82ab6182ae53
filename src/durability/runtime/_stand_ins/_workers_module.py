"""The `workers` stand-in: the public names of `workers-runtime-sdk`, as the embedded
runtime answers them.

Its HTTP classes are the runtime's (`_http`, `_blob`), `fetch` is real outbound HTTP
(`_outbound`), `env` / `wait_until` reach the served worker (`_workers`), and the RPC
conversions apply Cloudflare's refusals but hand values back as they are (there is no
JavaScript to convert them for). `WorkflowEntrypoint` is the workflows' own (loaded when
the module is), and `workers.workflows` has `NonRetryableError`. The SDK's submodules
`workers.entrypoints` and `workers.rpc` give the same classes and functions, with the
wrappers the SDK builds objects with (`_sdk_wrappers`).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from http import HTTPMethod
from types import ModuleType, SimpleNamespace
from typing import Any, Protocol, TypedDict

from .._blob import Blob, BlobEnding, File, FormData
from .._errors import DurableObjectAbort
from .._http import FetchResponse, Request, Response
from .._js_values import check_sendable
from .._object import DurableObject as RuntimeDurableObject
from .._outbound import fetch
from .._workers import CurrentEnv, patch_env, served_context
from .._workers import WorkerEntrypoint as RuntimeWorkerEntrypoint
from ._sdk_wrappers import DurableObjectContext, _EnvWrapper, wrap_init

EXPORTS = (
    "Blob", "BlobEnding", "BlobValue", "Body", "Context", "DurableObject", "FetchKwargs",
    "FetchResponse", "File", "FormData", "FormDataValue", "Headers", "JSBody", "Request",
    "RequestInitCfProperties", "Response", "WorkerEntrypoint", "WorkflowEntrypoint", "env",
    "fetch", "handler",
    "import_from_javascript", "patch_env", "python_from_rpc", "python_to_rpc", "waitUntil",
    "wait_until",
)  # fmt: skip
"""`workers.__all__`: the SDK's."""


class DurableObject(RuntimeDurableObject):
    """Cloudflare's `DurableObject` base class: stub calls to its objects cross as they
    cross JavaScript on Cloudflare (see `durability.runtime._js_values`), and its `ctx`
    and `env` come wrapped as the SDK wraps them."""

    _durability_crosses_as_on_cloudflare = True

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        wrap_init(cls, durable_object=True)


class WorkerEntrypoint(RuntimeWorkerEntrypoint):
    """Cloudflare's `WorkerEntrypoint` base class, its `env` wrapped as the SDK wraps it."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        wrap_init(cls, durable_object=False)


wrap_init(DurableObject, durable_object=True)
wrap_init(WorkerEntrypoint, durable_object=False)


class Context(Protocol):
    """What a handler's `ctx` offers: `waitUntil(awaitable)`."""

    def waitUntil(self, other: Awaitable[Any]) -> None: ...


class RequestInitCfProperties(TypedDict, total=False):
    """Cloudflare's `cf` options of an outgoing request (not applied by `serve`)."""

    apps: bool | None
    cacheEverything: bool | None
    cacheKey: str | None
    cacheTags: list[str] | None
    cacheTtl: int
    cacheTtlByStatus: dict[str, int]
    image: Any | None
    mirage: bool | None
    polish: str | None
    resolveOverride: str | None
    scrapeShield: bool | None
    webp: bool | None


class FetchKwargs(TypedDict, total=False):
    """The options of `fetch(url, **options)` and `Request(url, **options)`."""

    headers: Any
    body: Any
    method: HTTPMethod | str | None
    redirect: str | None
    cf: RequestInitCfProperties | None


def handler(func: Callable[..., Any]) -> Callable[..., Any]:
    """The SDK's decorator for module-style handlers: it converts JavaScript arguments to
    the SDK's classes, and here they already are."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return wrapper


def python_to_rpc(value: Any) -> Any:
    """`value` as it would be sent over RPC: the SDK's refusals apply (tuples,
    bytearrays, awaitables), and the value itself is returned."""
    check_sendable(value)
    return value


def python_from_rpc(value: Any) -> Any:
    """A value received over RPC, in Python terms: here it already is one."""
    return value


def import_from_javascript(module_name: str) -> Any:
    """`cloudflare:workers` (its `env`, `waitUntil`, `DurableObject`, `WorkerEntrypoint`);
    any other module raises `ImportError`, as a name workerd does not know does."""
    if module_name == "cloudflare:workers":
        return SimpleNamespace(
            env=CurrentEnv(),
            waitUntil=_wait_until,
            DurableObject=DurableObject,
            WorkerEntrypoint=WorkerEntrypoint,
        )
    raise ImportError(f"Failed to import '{module_name}': Error: No such module \"{module_name}\".")


def _wait_until(awaitable: Awaitable[Any]) -> None:
    served_context().wait_until(awaitable)


def _module_attribute(name: str) -> Any:
    if name == "env":
        return CurrentEnv()
    if name in ("wait_until", "waitUntil"):
        return _wait_until
    raise AttributeError(f"module 'workers' has no attribute {name!r}")


def fill_workers(module: ModuleType) -> None:
    """Fill in the `workers` stand-in."""
    from ..._workflows.entrypoint import WorkflowEntrypoint

    module.__dict__.update(
        WorkflowEntrypoint=WorkflowEntrypoint,
        Blob=Blob,
        BlobEnding=BlobEnding,
        BlobValue=(
            "str | bytes | js.ArrayBuffer | js.TypedArray | js.DataView | js.Blob | Blob | File"
        ),
        Body="str | FormData | JSBody",
        Context=Context,
        DurableObject=DurableObject,
        FetchKwargs=FetchKwargs,
        FetchResponse=FetchResponse,
        File=File,
        FormData=FormData,
        FormDataValue="str | js.Blob | Blob",
        Headers="dict[str, str] | list[tuple[str, str]] | js.Headers",
        JSBody="js.Blob | JsBuffer | js.FormData | js.ReadableStream | js.URLSearchParams",
        Request=Request,
        RequestInitCfProperties=RequestInitCfProperties,
        Response=Response,
        WorkerEntrypoint=WorkerEntrypoint,
        fetch=fetch,
        handler=handler,
        import_from_javascript=import_from_javascript,
        patch_env=patch_env,
        python_from_rpc=python_from_rpc,
        python_to_rpc=python_to_rpc,
        _EnvWrapper=_EnvWrapper,
        __all__=list(EXPORTS),
        __getattr__=_module_attribute,
        __doc__="Stand-in for Cloudflare's `workers` SDK, provided by durability.runtime.",
    )


def fill_entrypoints(module: ModuleType) -> None:
    """Fill in the `workers.entrypoints` stand-in: the SDK's base classes, `handler`,
    `DurableObjectContext` and `DurableObjectAbort`."""
    from ..._workflows.entrypoint import WorkflowEntrypoint

    module.__dict__.update(
        DurableObject=DurableObject,
        DurableObjectAbort=DurableObjectAbort,
        DurableObjectContext=DurableObjectContext,
        WorkerEntrypoint=WorkerEntrypoint,
        WorkflowEntrypoint=WorkflowEntrypoint,
        handler=handler,
        __doc__="Stand-in for `workers.entrypoints`, provided by durability.runtime.",
    )


def fill_rpc(module: ModuleType) -> None:
    """Fill in the `workers.rpc` stand-in: the RPC conversions and `_EnvWrapper`."""
    module.__dict__.update(
        python_from_rpc=python_from_rpc,
        python_to_rpc=python_to_rpc,
        _EnvWrapper=_EnvWrapper,
        __doc__="Stand-in for `workers.rpc`, provided by durability.runtime.",
    )


def fill_workflows(module: ModuleType) -> None:
    """Fill in the `workers.workflows` stand-in: `NonRetryableError`."""
    from ..._errors import NonRetryableError

    module.__dict__.update(
        NonRetryableError=NonRetryableError,
        __all__=["NonRetryableError"],
        __doc__="Stand-in for `workers.workflows`, provided by durability.runtime.",
    )
