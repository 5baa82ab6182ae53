"""`Durable`, `@operation`, `@named_alarm`: an object's handlers declared on its class.

A decorated method is a declaration: the class collects its declarations when it is
defined (checking names and options then), and `Durable.__init__` builds the object's
one scheduler and a `Durability` / `DurabilityAlarms` holding them, exactly as helpers
built by hand would be. On an instance the method's name gives its handle
(`DurableOperation` / `NamedAlarm`); the engine calls the function itself.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Generic, TypeVar, overload

from ._alarms import DurabilityAlarms, NamedAlarm
from ._engine import (
    AlarmMethodOptions,
    DurabilityScheduler,
    MethodOptions,
    RetryPolicy,
    object_scheduler,
    options_of,
)
from ._operations import Durability, DurableOperation
from ._validate import check_callable, check_positive_int
from ._workflows import DurabilityWorkflows, WorkflowMethod

Options = TypeVar("Options", MethodOptions, AlarmMethodOptions)
Handle = TypeVar("Handle", DurableOperation, NamedAlarm)

_OWN_NAMES = frozenset({"alarm", "alarms", "ctx", "durability", "env", "scheduler", "workflows"})
"""Names `Durable` and the host's base class give the instance: never handler names."""


class _Declaration(Generic[Options, Handle]):
    """A decorated method: its function and options, and its handle on instances."""

    __slots__ = ("function", "name", "options")

    function: Callable[..., Any]
    options: Options
    name: str
    _decorator: ClassVar[str]
    _owner: ClassVar[type[Durability] | type[DurabilityAlarms]]
    _helper: ClassVar[str]
    """The instance attribute holding the helper the handles come from."""
    _lookup: ClassVar[str]
    """The helper's method giving the handle of a name."""

    def __init__(self, function: Callable[..., Any], options: Options) -> None:
        check_callable(f"@{self._decorator} target", function)
        self.function = function
        self.options = options
        self.name = getattr(function, "__name__", "")

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(
        self, instance: None, owner: type | None = None
    ) -> _Declaration[Options, Handle]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> Handle: ...

    def __get__(
        self, instance: object | None, owner: type | None = None
    ) -> _Declaration[Options, Handle] | Handle:
        if instance is None:
            return self
        helper = vars(instance).get(self._helper)
        if helper is None:
            raise AttributeError(
                f"{self.name!r} is an @{self._decorator} method: its handle exists once "
                "Durable.__init__ has run (call super().__init__(ctx, env) first)"
            )
        handle: Handle = getattr(helper, self._lookup)(self.name)
        return handle

    def check_name(self) -> None:
        """`ValueError` when the method's name is reserved by its helper or by `Durable`."""
        reserved = {name for name in dir(self._owner) if not name.startswith("_")}
        if self.name in reserved:
            raise ValueError(f'"{self.name}" is reserved by {self._owner.__name__}')
        if self.name in _OWN_NAMES:
            raise ValueError(f'"{self.name}" is reserved by Durable')

    def __repr__(self) -> str:
        return f"<@{self._decorator} {self.name}>"


class OperationMethod(_Declaration[MethodOptions, DurableOperation]):
    """An `@operation` method: `self.<name>` is its `DurableOperation`."""

    __slots__ = ()
    _decorator = "operation"
    _owner = Durability
    _helper = "durability"
    _lookup = "operation"


class NamedAlarmMethod(_Declaration[AlarmMethodOptions, NamedAlarm]):
    """A `@named_alarm` method: `self.<name>` is its `NamedAlarm`."""

    __slots__ = ()
    _decorator = "named_alarm"
    _owner = DurabilityAlarms
    _helper = "alarms"
    _lookup = "named"


def _check_common(attempt_timeout_ms: object, retries: object) -> None:
    """The options both decorators take, checked when the decorator is applied."""
    if attempt_timeout_ms is not None:
        check_positive_int("attempt_timeout_ms", attempt_timeout_ms)
    if retries is not None and not isinstance(retries, RetryPolicy):
        raise TypeError(f"retries must be a RetryPolicy, got {type(retries).__name__}")


@overload
def operation(function: Callable[..., Any], /) -> OperationMethod: ...


@overload
def operation(
    *, attempt_timeout_ms: int | None = None, retries: RetryPolicy | None = None
) -> Callable[[Callable[..., Any]], OperationMethod]: ...


def operation(
    function: Callable[..., Any] | None = None,
    /,
    *,
    attempt_timeout_ms: int | None = None,
    retries: RetryPolicy | None = None,
) -> OperationMethod | Callable[[Callable[..., Any]], OperationMethod]:
    """Declare a method of a `Durable` class as a durable operation (`handler(self, call)`).

    `attempt_timeout_ms` and `retries` are its own options; `None` inherits the defaults
    (300 s, `RetryPolicy()`). Usable bare (`@operation`) or called (`@operation(...)`).
    """
    _check_common(attempt_timeout_ms, retries)
    options = MethodOptions(attempt_timeout_ms=attempt_timeout_ms, retries=retries)
    if function is not None:
        return OperationMethod(function, options)
    return lambda target: OperationMethod(target, options)


@overload
def named_alarm(function: Callable[..., Any], /) -> NamedAlarmMethod: ...


@overload
def named_alarm(
    *,
    attempt_timeout_ms: int | None = None,
    retries: RetryPolicy | None = None,
    retry_timeouts: bool = False,
) -> Callable[[Callable[..., Any]], NamedAlarmMethod]: ...


def named_alarm(
    function: Callable[..., Any] | None = None,
    /,
    *,
    attempt_timeout_ms: int | None = None,
    retries: RetryPolicy | None = None,
    retry_timeouts: bool = False,
) -> NamedAlarmMethod | Callable[[Callable[..., Any]], NamedAlarmMethod]:
    """Declare a method of a `Durable` class as a named alarm (`handler(self, info)`).

    `attempt_timeout_ms` and `retries` as for `@operation`; `retry_timeouts` (default
    False) retries a timed-out occurrence instead of failing it.
    """
    _check_common(attempt_timeout_ms, retries)
    if not isinstance(retry_timeouts, bool):
        raise TypeError(f"retry_timeouts must be a bool, got {type(retry_timeouts).__name__}")
    options = AlarmMethodOptions(
        attempt_timeout_ms=attempt_timeout_ms, retries=retries, retry_timeouts=retry_timeouts
    )
    if function is not None:
        return NamedAlarmMethod(function, options)
    return lambda target: NamedAlarmMethod(target, options)


class Durable:
    """Mixin for a Durable Object class whose handlers are decorated methods.

    Put it first: ``class Billing(Durable, DurableObject)`` (the embedded runtime's or
    Cloudflare's `workers.DurableObject`). `scheduler_options` (a mapping of
    `DurabilityScheduler` options) configures the object's scheduler; one built before
    (by a helper given `context=`) is joined when its options agree. `alarm()` runs the
    scheduler's pass; a class defining its own calls ``await super().alarm(info)``.
    """

    scheduler_options: ClassVar[Mapping[str, Any]] = {}
    _operations: ClassVar[dict[str, OperationMethod]] = {}
    _named_alarms: ClassVar[dict[str, NamedAlarmMethod]] = {}
    _workflows: ClassVar[dict[str, WorkflowMethod]] = {}

    scheduler: DurabilityScheduler
    durability: Durability
    """Set when the class has `@operation` methods."""
    alarms: DurabilityAlarms
    """Set when the class has `@named_alarm` methods."""
    workflows: DurabilityWorkflows
    """Set when the class has `@workflow` methods."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        options_of(cls.scheduler_options, " in scheduler_options")
        found: dict[str, object] = {}
        for klass in reversed(cls.__mro__):
            found.update(vars(klass))
        operations: dict[str, OperationMethod] = {}
        named_alarms: dict[str, NamedAlarmMethod] = {}
        workflows: dict[str, WorkflowMethod] = {}
        for name, value in found.items():
            if isinstance(value, OperationMethod):
                value.check_name()
                operations[name] = value
            elif isinstance(value, NamedAlarmMethod):
                value.check_name()
                named_alarms[name] = value
            elif isinstance(value, WorkflowMethod):
                value.check_name(_OWN_NAMES)
                workflows[name] = value
        cls._operations = operations
        cls._named_alarms = named_alarms
        cls._workflows = workflows

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)  # type: ignore[call-arg]  # the host's DurableObject
        cls = type(self)
        joined = DurabilityScheduler.of(ctx) is not None
        self.scheduler = object_scheduler(ctx, cls.scheduler_options)
        try:
            if cls._operations:
                self.durability = Durability(
                    scheduler=self.scheduler,
                    handlers=self._bound(cls._operations),
                    methods={name: found.options for name, found in cls._operations.items()},
                )
            if cls._named_alarms:
                self.alarms = DurabilityAlarms(
                    scheduler=self.scheduler,
                    handlers=self._bound(cls._named_alarms),
                    methods={name: found.options for name, found in cls._named_alarms.items()},
                )
            if cls._workflows:
                self.workflows = DurabilityWorkflows(
                    scheduler=self.scheduler, workflows=self._bound(cls._workflows)
                )
        except BaseException:
            if not joined:  # a failed construction leaves no scheduler behind for this ctx
                self.scheduler._release()
            raise

    def _bound(
        self, declared: Mapping[str, _Declaration[Any, Any] | WorkflowMethod]
    ) -> dict[str, Any]:
        """Each declared function bound to this instance: the engine calls it with
        `(self, argument)`."""
        return {name: types.MethodType(found.function, self) for name, found in declared.items()}

    async def alarm(self, info: Any = None) -> None:
        """The object's alarm: run the due work of every helper on its scheduler.

        `info` is the host's alarm invocation info as it comes (typed `Any` so an
        override may annotate it as its host's type)."""
        await self.scheduler.alarm(info)
