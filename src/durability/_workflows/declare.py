"""`@workflow`: a method of a `Durable` class declared as a workflow `run(self, event, step)`.

`Durable.__init__` gathers the class's `@workflow` methods into one `DurabilityWorkflows`
(`self.workflows`) on the object's scheduler; on an instance, `self.<method>` is the
workflow's `Workflow` handle (`create`, `create_batch`, `get`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, overload

from .._validate import check_callable
from .handles import Workflow
from .helper import DurabilityWorkflows


class WorkflowMethod:
    """A `@workflow` method: its function, and its `Workflow` on instances."""

    __slots__ = ("function", "name")

    def __init__(self, function: Callable[..., Any]) -> None:
        check_callable("@workflow target", function)
        self.function = function
        self.name = getattr(function, "__name__", "")

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> WorkflowMethod: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> Workflow: ...

    def __get__(
        self, instance: object | None, owner: type | None = None
    ) -> WorkflowMethod | Workflow:
        if instance is None:
            return self
        helper = vars(instance).get("workflows")
        if not isinstance(helper, DurabilityWorkflows):
            raise AttributeError(
                f"{self.name!r} is a @workflow method: its handle exists once "
                "Durable.__init__ has run (call super().__init__(ctx, env) first)"
            )
        return helper.workflow(self.name)

    def check_name(self, own_names: Collection[str]) -> None:
        """`ValueError` when the name is reserved (by `DurabilityWorkflows` or the host)."""
        reserved = {name for name in dir(DurabilityWorkflows) if not name.startswith("_")}
        if self.name in reserved:
            raise ValueError(f'"{self.name}" is reserved by DurabilityWorkflows')
        if self.name in own_names:
            raise ValueError(f'"{self.name}" is reserved by Durable')

    def __repr__(self) -> str:
        return f"<@workflow {self.name}>"


@overload
def workflow(function: Callable[..., Any], /) -> WorkflowMethod: ...


@overload
def workflow() -> Callable[[Callable[..., Any]], WorkflowMethod]: ...


def workflow(
    function: Callable[..., Any] | None = None, /
) -> WorkflowMethod | Callable[[Callable[..., Any]], WorkflowMethod]:
    """Declare a method of a `Durable` class as a workflow, ``run(self, event, step)``,
    named after the method. Usable bare (`@workflow`) or called (`@workflow()`)."""
    if function is not None:
        return WorkflowMethod(function)
    return WorkflowMethod
