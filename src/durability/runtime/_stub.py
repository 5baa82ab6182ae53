"""Namespaces, stubs and `env`: how code reaches objects and other bindings."""

from __future__ import annotations

import dis
import inspect
from collections.abc import Awaitable, Callable, Iterator, Mapping
from operator import methodcaller
from types import CodeType, FunctionType
from typing import TYPE_CHECKING, Any, cast

from .._types import JsonValue
from ._copy import copy_arguments, copy_value
from ._http import Request
from ._ids import ObjectId, id_from_name, id_from_string, new_unique_id
from ._js_errors import JsException, js_error, python_error
from ._js_values import js_string, to_remote, to_remote_arguments
from ._object import DurableObject, crosses_as_on_cloudflare
from ._stub_fetch import fetch_object

if TYPE_CHECKING:
    from ._host import Runtime
    from ._http import Response


class ObjectNamespace:
    """The objects of one `DurableObject` class bound under one name."""

    __slots__ = ("_cloudflare", "_cls", "_direct", "_methods", "_name", "_runtime")

    def __init__(self, runtime: Runtime, name: str, cls: type[DurableObject]) -> None:
        self._runtime = runtime
        self._name = name
        self._cls = cls
        self._cloudflare = crosses_as_on_cloudflare(cls)
        self._methods: dict[str, bool] = {}
        self._direct: dict[str, CodeType | None] = {}

    def has_method(self, name: str) -> bool:
        """Whether the class has a method `name` (remembered per name)."""
        known = self._methods.get(name)
        if known is None:
            known = self._methods[name] = inspect.isroutine(getattr(self._cls, name, None))
        return known

    def _direct_code(self, name: str) -> CodeType | None:
        """The code of method `name` if a call to it cannot suspend (remembered per name).

        That is a plain function defined on the class whose code has no await (an
        `async def` without await, or a synchronous method); such calls may run without
        a task of their own when the object is idle.
        """
        try:
            return self._direct[name]
        except KeyError:
            pass
        method = getattr(self._cls, name, None)
        code: CodeType | None = None
        if type(method) is FunctionType and not _can_suspend(method.__code__):
            code = method.__code__
        self._direct[name] = code
        return code

    @property
    def name(self) -> str:
        """The binding name."""
        return self._name

    @property
    def object_class(self) -> type[DurableObject]:
        """The class whose instances this namespace hosts."""
        return self._cls

    def id_from_name(self, name: str) -> ObjectId:
        """The id `name` always maps to."""
        return id_from_name(self._name, name)

    def new_unique_id(self) -> ObjectId:
        """A fresh random id."""
        return new_unique_id(self._name)

    def id_from_string(self, text: str) -> ObjectId:
        """The id whose `str()` is `text` (64 hex)."""
        return id_from_string(self._name, text)

    def get(self, id: ObjectId, options: object = None) -> ObjectStub:
        """A stub for the object with `id` (Cloudflare's options have no effect here)."""
        if not isinstance(id, ObjectId):
            raise js_error(
                "TypeError",
                "Failed to execute 'get' on 'DurableObjectNamespace': parameter 1 is not of "
                "type 'DurableObjectId'.",
                TypeError,
            )
        if id.namespace != self._name:
            raise ValueError(f"id belongs to namespace {id.namespace!r}, not {self._name!r}")
        return ObjectStub(self, id)

    def get_by_name(self, name: str) -> ObjectStub:
        """A stub for the object named `name`."""
        return self.get(self.id_from_name(name))

    # Cloudflare's spelling of the same methods, taking what Cloudflare's take, so a
    # Worker's code runs here unchanged.
    def idFromName(self, name: object) -> ObjectId:
        """`id_from_name` of the text JavaScript makes of `name` (`5` is `"5"`, `None`,
        which reaches it as `undefined`, is `"undefined"`)."""
        return self.id_from_name("undefined" if name is None else js_string(name))

    def newUniqueId(self, options: object = None) -> ObjectId:
        """`new_unique_id`; a jurisdiction is refused, as workerd refuses it."""
        found = options.get("jurisdiction") if isinstance(options, dict) else None
        if found is not None or getattr(options, "jurisdiction", None) is not None:
            raise js_error("Error", "Jurisdiction restrictions are not implemented in workerd.")
        return self.new_unique_id()

    def idFromString(self, text: object) -> ObjectId:
        """`id_from_string`, with Cloudflare's error for what is not an id."""
        try:
            return self.id_from_string(js_string(text))
        except ValueError:
            raise js_error(
                "TypeError", "Invalid Durable Object ID: must be 64 hex digits", ValueError
            ) from None

    def getByName(self, name: object, options: object = None) -> ObjectStub:
        """`get_by_name` of the text JavaScript makes of `name`."""
        return self.get(self.idFromName(name))

    def __repr__(self) -> str:
        return f"ObjectNamespace({self._name!r}, {self._cls.__name__})"


class ObjectStub:
    """A handle on one object: `await stub.method(*args, **kwargs)` calls it.

    Only public methods of the class can be called (another name raises Cloudflare's
    "Method ... does not exist", which is also an `AttributeError`); `stub.fetch(request)`
    reaches the object's `fetch`; calls are delivered in the order they are made.
    Arguments and results cross as the object's class says: a class from Cloudflare's
    `workers` gets Cloudflare's crossing (see `_js_values`: keyword arguments arrive as
    one last `JsDict`, dicts come back as `JsDict`); any other class gets copies of JSON
    values, keyword arguments passed as such.
    """

    # The instance dict holds each method's caller once built, where attribute lookup
    # finds it without `__getattr__` (and the AttributeError it follows).
    __slots__ = ("__dict__", "_id", "_namespace")
    _id: ObjectId
    _namespace: ObjectNamespace

    def __init__(self, namespace: ObjectNamespace, object_id: ObjectId) -> None:
        object.__setattr__(self, "_namespace", namespace)
        object.__setattr__(self, "_id", object_id)

    @property
    def id(self) -> ObjectId:
        """The id of the object this stub calls."""
        return self._id

    @property
    def name(self) -> str | None:
        """The name the object was reached by, if any."""
        return self._id.name

    def __setattr__(self, name: str, value: object) -> None:
        # An attribute set on a stub would shadow the remote method of that name.
        raise AttributeError(f"stub attributes cannot be set (tried {name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"stub attributes cannot be deleted (tried {name!r})")

    def fetch(self, input: Request | str, **options: Any) -> Awaitable[Response]:
        """Send an HTTP request to the object's `fetch(request)`; its `Response`, as the
        caller gets it on Cloudflare (with the request's URL; a WebSocket upgrade, 101,
        comes back as is)."""
        return fetch_object(self._namespace, self._id, Request(input, **options))

    def __getattr__(self, method: str) -> Callable[..., Awaitable[Any]]:
        # Only reached for names that are not attributes: each method's caller is built
        # here once, then found in the instance dict.
        if method.startswith("__") and method.endswith("__"):
            raise AttributeError(method)
        if method.startswith("_") or not self._namespace.has_method(method):
            raise js_error("TypeError", f"Method {method} does not exist", AttributeError)
        runtime = self._namespace._runtime
        object_id = self._id
        key = (object_id.namespace, str(object_id))
        direct = self._namespace._direct_code(method)
        if self._namespace._cloudflare:

            def call(*args: Any, **kwargs: Any) -> Awaitable[Any]:
                invoke = _CloudflareCall(method, to_remote_arguments(args, kwargs))
                return _delivered(runtime, key, object_id, invoke, direct, _as_on_cloudflare)

        else:

            def call(*args: Any, **kwargs: Any) -> Awaitable[Any]:
                # String types: `list[JsonValue]` would build a generic alias on every call.
                copied_args = copy_arguments(args)
                copied_kwargs = (
                    cast("dict[str, JsonValue]", copy_value(kwargs, "keyword arguments"))
                    if kwargs
                    else {}
                )
                # methodcaller: `obj.method(*args, **kwargs)` without a Python-level frame.
                invoke = methodcaller(method, *copied_args, **copied_kwargs)
                return _delivered(runtime, key, object_id, invoke, direct, _json_copy)

        call.__name__ = method
        self.__dict__[method] = call
        return call

    def __repr__(self) -> str:
        return f"ObjectStub({self._id!r})"


async def _delivered(
    runtime: Runtime,
    key: tuple[str, str],
    object_id: ObjectId,
    invoke: Callable[[DurableObject], object],
    direct: CodeType | None,
    convert: Callable[[object], Any],
) -> Any:
    """Deliver `invoke` to the object; its result as the caller gets it (`convert`).
    `direct`: the method's code when it cannot suspend (see `Instance.call`)."""
    result = await runtime._live_instance(key, object_id).call(invoke, direct=direct)
    return result if result is None else convert(result)


class _CloudflareCall:
    """`target.method(*args)`, as Cloudflare makes the call: arguments the method cannot
    take raise `JsException: TypeError: <Python's message>` (not the object's error)."""

    __slots__ = ("args", "method")

    def __init__(self, method: str, args: list[Any]) -> None:
        self.method, self.args = method, args

    def __call__(self, target: DurableObject) -> object:
        bound = getattr(target, self.method)
        try:
            return bound(*self.args)
        except TypeError as error:
            # Raised here, not in a frame of the method: its arguments did not bind.
            if error.__traceback__ is not None and error.__traceback__.tb_next is None:
                raise js_error("TypeError", str(error), TypeError) from None
            raise


def _json_copy(result: object) -> JsonValue:
    return copy_value(result, "result")


def _as_on_cloudflare(result: object) -> Any:
    """The result as the caller gets it on Cloudflare, where it is converted inside the
    object: a failure arrives as the object's own error, wrapped in a `JsException`."""
    try:
        return to_remote(result)
    except JsException:
        raise
    except TypeError as error:
        raise python_error(error) from None


def _can_suspend(code: CodeType) -> bool:
    """Whether running `code` may suspend: every await (and async for/with) yields."""
    return any(instruction.opname == "YIELD_VALUE" for instruction in dis.get_instructions(code))


class Env:
    """The bindings: `env.NAME` or `env["NAME"]` (a namespace, or the value as given)."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, object]) -> None:
        self._values = dict(values)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"env has no binding {name!r}") from None

    def __getitem__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(f"env has no binding {name!r}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __repr__(self) -> str:
        return f"Env({sorted(self._values)})"
