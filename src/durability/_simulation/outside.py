"""Outside services under the simulation: a binding that is not an object class (a fake
payments provider, a mailer, a cold store passed in `env`) is reached through `Outside`,
which may make each call slow, fail it before or after the service's effect, or crash the
calling object just before or just after that effect."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from typing import Any

from .._crash_point import crash_point
from ..runtime._instance import running_instance
from ..runtime._object import DurableObject
from .injector import Injector

_PLAIN = (str, bytes, int, float, bool, list, dict, tuple, set, frozenset, type(None))


class OutsideCallError(ConnectionError):
    """A call to an outside service failed because the simulation said so."""


def is_service(value: object) -> bool:
    """Whether a binding is an outside service the simulation stands between: an instance
    of a class of the user's (not a plain value, an object class or the library's own)."""
    if isinstance(value, (*_PLAIN, type, DurableObject)) or inspect.ismodule(value):
        return False
    module = getattr(type(value), "__module__", "") or ""
    return not (module == "builtins" or module.startswith("durability."))


class Outside:
    """Stands between the objects and one outside service, binding `name`."""

    def __init__(self, target: object, name: str, injector: Injector) -> None:
        self._target = target
        self._name = name
        self._injector = injector
        self._wrapped: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"Outside({self._name}: {self._target!r})"

    def __getattr__(self, attribute: str) -> Any:
        value = getattr(self._target, attribute)
        if attribute.startswith("_") or not callable(value):
            return value
        wrapped = self._wrapped.get(attribute)
        if wrapped is None or wrapped.__wrapped__ != value:
            wrapped = self._wrap(attribute, value)
            self._wrapped[attribute] = wrapped
        return wrapped

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not callable(self._target):
            raise TypeError(f"binding {self._name} is not callable")
        return self._wrap("__call__", self._target)(*args, **kwargs)

    def _wrap(self, attribute: str, method: Callable[..., Any]) -> Any:
        label = self._name if attribute == "__call__" else f"{self._name}.{attribute}"
        if inspect.iscoroutinefunction(method):

            @functools.wraps(method)
            async def call(*args: Any, **kwargs: Any) -> Any:
                return await self._call_async(label, method, args, kwargs)

            return call

        @functools.wraps(method)
        def call_sync(*args: Any, **kwargs: Any) -> Any:
            fault = self._injector.outside(label, None)
            action = fault.action if fault is not None else None
            if action == "fail_before":
                raise OutsideCallError(f"{label} failed before its effect (injected)")
            result = self._same(method(*args, **kwargs))
            if action == "fail_after":
                raise OutsideCallError(f"{label} failed after its effect (injected)")
            return result

        return call_sync

    async def _call_async(
        self, label: str, method: Callable[..., Any], args: Any, kwargs: Any
    ) -> Any:
        caller = running_instance()
        fault = self._injector.outside(label, None if caller is None else caller.id)
        action = fault.action if fault is not None else None
        if fault is not None and action == "slow" and fault.params:
            await asyncio.sleep(fault.params[0] / 1000)
        if action == "fail_before":
            raise OutsideCallError(f"{label} failed before its effect (injected)")
        if action == "crash_before":
            await _crash_here()
        result = self._same(await method(*args, **kwargs))
        if action == "fail_after":
            raise OutsideCallError(f"{label} failed after its effect (injected)")
        if action == "crash_after":
            await _crash_here()
        return result

    def _same(self, result: Any) -> Any:
        """A method returning its service (`getByName(...)` of a fake) returns this proxy."""
        return self if result is self._target else result


async def _crash_here() -> None:
    """Crash the calling object, unless something took it down already."""
    instance = running_instance()
    if instance is not None and not instance.gone:
        await crash_point()
