"""`WorkflowStep`: the `step` a workflow's `run(event, step)` is given.

The API of Cloudflare's Python Workflows SDK: ``@step.do(name=None, *, concurrent=False,
config=None)`` turns a function into a step, run by awaiting ``fn()``; its parameters
name the steps whose results it takes (or ``ctx``, the attempt's context), or, in the
older form, ``depends=[step_a, step_b]`` lists them in parameter order; dependencies
run first, all at once when `concurrent`. A step function awaited again (or by several
dependants) runs once. ``step.sleep``, ``step.sleep_until`` and ``step.wait_for_event``
are awaited directly.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Coroutine, Sequence
from datetime import datetime
from types import CodeType, FunctionType
from typing import Any

from .._clock import now_ms
from .._validate import to_epoch_ms
from .durations import check_span, duration_ms
from .run import Run
from .steps import run_do, run_sleep, run_wait
from .validate import check_event_type, check_step_name
from .values import AttrDict

_CTX = "ctx"


class StepFunction:
    """A function made a step by `@step.do`: await `fn()` to run it (once per run)."""

    __slots__ = (
        "_config",
        "_depends",
        "_function",
        "_plain",
        "_result",
        "_step",
        "concurrent",
        "name",
    )

    def __init__(
        self,
        step: WorkflowStep,
        name: str,
        function: Callable[..., Any],
        depends: Sequence[StepFunction] | None,
        concurrent: bool,
        config: object,
    ) -> None:
        self._step = step
        self.name = name
        self._function = function
        self._depends = None if depends is None else list(depends)
        self.concurrent = concurrent
        self._config = config
        self._plain = not (
            inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function)
        )
        self._result: asyncio.Future[Any] | None = None

    def __call__(self) -> Coroutine[Any, Any, Any]:
        """Run the step (its dependencies first) once awaited, in the awaiting task, as
        Cloudflare's SDK does; awaited again, it gives the first run's outcome."""
        return self._awaited()

    async def _awaited(self) -> Any:
        outcome = self._result
        if outcome is not None:
            return await asyncio.shield(outcome)
        outcome = self._result = asyncio.get_running_loop().create_future()
        run = self._step._run
        run.adopt()
        try:
            value = await self._execute()
        except asyncio.CancelledError:
            outcome.cancel()
            raise
        except BaseException as error:
            outcome.set_exception(error)
            outcome.exception()  # seen here: an awaiter that comes later sees it again
            raise
        outcome.set_result(value)
        return value

    def __repr__(self) -> str:
        return f"<step {self.name!r}>"

    async def _execute(self) -> Any:
        parameters = _parameter_names(self._function)
        sources = self._sources(parameters)
        values: list[Any] = [None] * len(sources)
        needed = [(i, source) for i, source in enumerate(sources) if source is not None]
        if self.concurrent:
            results = await asyncio.gather(*(source() for _, source in needed))
        else:
            results = [await source() for _, source in needed]
        for (index, _), result in zip(needed, results, strict=True):
            values[index] = result
        function = self._function
        ctx_at = parameters.index(_CTX) if _CTX in parameters else None

        def call(ctx: Callable[[], AttrDict]) -> Any:
            if ctx_at is not None:
                values[ctx_at] = ctx()
            return function(*values)

        return await run_do(self._step._run, self.name, self._config, call, self._plain, self)

    def _sources(self, parameters: tuple[str, ...]) -> list[StepFunction | None]:
        """For each parameter, the step whose result it takes (`None` for `ctx`)."""
        if self._depends is None:
            sources: list[StepFunction | None] = []
            for parameter in parameters:
                if parameter == _CTX:
                    sources.append(None)
                    continue
                found = self._step._functions.get(parameter)
                if found is None:
                    raise TypeError(
                        f'step "{self.name}": parameter {parameter!r} names no step '
                        "(parameters name the steps whose results they take, or ctx)"
                    )
                sources.append(found)
            return sources
        others = [p for p in parameters if p != _CTX]
        if len(others) != len(self._depends):
            raise TypeError(
                f'step "{self.name}" has {len(others)} parameter(s) besides ctx but '
                f"depends lists {len(self._depends)}"
            )
        given = iter(self._depends)
        return [None if p == _CTX else next(given) for p in parameters]


def _parameter_names(function: Callable[..., Any]) -> tuple[str, ...]:
    """The names of `function`'s parameters, in order. A plain function's come from its
    code object, read once: a workflow that declares its steps in a loop makes a new
    function per step from one code object."""
    if type(function) is FunctionType and not (
        hasattr(function, "__wrapped__") or hasattr(function, "__signature__")
    ):
        return _code_parameters(function.__code__)
    return tuple(inspect.signature(function).parameters)


@functools.lru_cache(maxsize=1024)
def _code_parameters(code: CodeType) -> tuple[str, ...]:
    """Parameter names as `inspect.signature` orders them: positional, `*args`,
    keyword-only, `**kwargs` (the code object keeps both starred names last)."""
    names = code.co_varnames
    positional, keyword = code.co_argcount, code.co_kwonlyargcount
    starred = positional + keyword
    ordered = list(names[:positional])
    if code.co_flags & inspect.CO_VARARGS:
        ordered.append(names[starred])
        starred += 1
    ordered.extend(names[positional : positional + keyword])
    if code.co_flags & inspect.CO_VARKEYWORDS:
        ordered.append(names[starred])
    return tuple(ordered)


class WorkflowStep:
    """The `step` argument of `run(event, step)` (one per run)."""

    def __init__(self, run: Run) -> None:
        self._run = run
        self._functions: dict[str, StepFunction] = {}

    def do(
        self,
        name: str | None = None,
        depends: Sequence[StepFunction] | None = None,
        concurrent: bool = False,
        config: dict[str, Any] | None = None,
    ) -> Callable[[Callable[..., Any]], StepFunction]:
        """Decorate a function as a step named `name` (default: the function's name).

        `config`: ``{"retries": {"limit", "delay", "backoff"}, "timeout"}``, merged over
        the defaults (5 retries, 10 s, exponential; 10 minutes per attempt)."""
        if name is not None:
            check_step_name(name)
        if not isinstance(concurrent, bool):
            raise TypeError(f"concurrent must be a bool, got {type(concurrent).__name__}")
        if depends is not None:
            if isinstance(depends, (str, bytes)) or not isinstance(depends, Sequence):
                raise TypeError("depends must be a list of step functions")
            for dependency in depends:
                if not isinstance(dependency, StepFunction):
                    raise TypeError(
                        f"depends lists {dependency!r}, which is not a function decorated "
                        "with step.do"
                    )

        def decorate(function: Callable[..., Any]) -> StepFunction:
            if not callable(function):
                raise TypeError(f"step.do decorates a function, got {type(function).__name__}")
            step_name = name
            if step_name is None:  # a given name was checked above
                step_name = check_step_name(getattr(function, "__name__", ""))
            made = StepFunction(self, step_name, function, depends, concurrent, config)
            self._functions[step_name] = made
            return made

        return decorate

    async def sleep(self, name: str, duration: int | float | str) -> None:
        """Sleep durably for `duration` (ms or a string such as ``"3 days"``)."""
        check_step_name(name)
        span = check_span("duration", duration)
        await run_sleep(self._run, name, lambda now: now + span)

    async def sleep_until(self, name: str, timestamp: int | float | datetime) -> None:
        """Sleep durably until `timestamp` (epoch ms or an aware datetime)."""
        check_step_name(name)
        if isinstance(timestamp, float):
            timestamp = duration_ms("timestamp", timestamp)
        when = to_epoch_ms("timestamp", timestamp)

        def wake(now: int) -> int:
            if when < now:
                raise ValueError(f'sleep_until "{name}": {when} is in the past (now is {now})')
            return when

        if self._run.journal.get(("sleep", name)) is None and when < now_ms():
            wake(now_ms())
        await run_sleep(self._run, name, wake)

    async def wait_for_event(
        self, name: str, event_type: str, /, timeout: int | float | str = "24 hours"
    ) -> AttrDict:
        """Wait for an event of `event_type` sent to this instance (one sent before is
        kept for it): ``{type, payload, timestamp}``. After `timeout` it raises
        `WorkflowTimeoutError`."""
        check_step_name(name)
        check_event_type(event_type)
        limit = check_span("timeout", timeout)
        return await run_wait(self._run, name, event_type, limit)

    waitForEvent = wait_for_event
    sleepUntil = sleep_until
